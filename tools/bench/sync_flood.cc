// kmodd-sync-flood: one client opening Sync streams as fast as it can, each with a hello
// and a bearer token, for a controller in Kubernetes mode, where each such hello costs a
// TokenReview (tools/bench/sync_flood runs it and watches the controller).
//
// Streams use gRPC's callback API (no thread per stream), spread round-robin over
// --connections channels, each with a distinct channel argument and a local subchannel
// pool (as tools/loadgen/fleet.cc), so that each is its own TCP connection. At most
// --inflight are open at once: a new one starts as soon as one ends, so the client stays
// bounded and the rate it reaches is the rate the server ends them at. A stream is never
// half-closed: it ends when the server ends it (a refusal), or is cancelled at the end of
// the run (counted as open_at_end, not as an outcome). A hello that the server accepts
// (a desired state comes back) is counted and cancelled.
//
// The JSON line: started and ended streams (and per second), ended by status code, one
// message per code (an UNAVAILABLE from a full review queue and one from a lost
// connection differ only there), and the median and p99 time from start to end.

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/grpcpp.h"
#include "kmodd/v1/sync.grpc.pb.h"
#include "tools/bench/sync_flood_options.h"

namespace kmodd::bench {
namespace {

using Clock = std::chrono::steady_clock;

// How a stream ended, in the order the JSON lists them.
constexpr std::array<const char*, 6> kOutcomeNames = {
    "UNAVAILABLE", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED", "PERMISSION_DENIED", "OK", "other"};

size_t OutcomeOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
      return 0;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 1;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 2;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 3;
    case grpc::StatusCode::OK:
      return 4;
    default:
      return 5;
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

class Flood;

class FloodStream final : public grpc::ClientBidiReactor<v1::NodeReport, v1::NodeDesired> {
 public:
  explicit FloodStream(Flood* flood) : flood_(flood) {}

  void Start(v1::Controller::Stub* stub, const std::string& token, const std::string& node) {
    // Plain metadata rather than call credentials: the same header on the wire, without a
    // credentials plugin per call in the client's own CPU.
    ctx_.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    hello_.mutable_node()->set_name(node);
    hello_.mutable_node()->set_agent_version("kmodd-sync-flood");
    started_ = Clock::now();
    stub->async()->Sync(&ctx_, this);
    StartWrite(&hello_);
    StartRead(&in_);
    StartCall();
  }
  void Cancel() { ctx_.TryCancel(); }

  void OnWriteDone(bool /*ok*/) override {}
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  Flood* const flood_;
  grpc::ClientContext ctx_;
  v1::NodeReport hello_;
  v1::NodeDesired in_;
  Clock::time_point started_;
};

class Flood {
 public:
  explicit Flood(const SyncFloodOptions& o,
                 const std::shared_ptr<grpc::ChannelCredentials>& credentials)
      : o_(o) {
    for (int c = 0; c < o.connections; ++c) {
      grpc::ChannelArguments args;
      args.SetInt("kmodd.sync_flood.channel", c);
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      stubs_.push_back(
          v1::Controller::NewStub(grpc::CreateCustomChannel(o.controller, credentials, args)));
    }
  }

  // Floods for the duration, cancels what is still open and prints the JSON line. Returns
  // false if streams were still not done 10 s after their cancel.
  bool Run() {
    std::mt19937_64 rng(std::random_device{}());
    const auto start = Clock::now();
    const auto end = start + std::chrono::seconds(o_.duration_s);
    for (uint64_t i = 0;; ++i) {
      std::vector<FloodStream*> dead;
      {
        std::unique_lock lock(mu_);
        const bool room = cv_.wait_until(lock, end, [&] {
          return static_cast<int>(live_.size()) < o_.inflight || !dead_.empty();
        });
        dead.swap(dead_);
        if (!room || Clock::now() >= end) {
          stopping_ = true;
        }
      }
      DeleteAll(dead);
      if (stopping_) {
        break;
      }
      {
        std::lock_guard lock(mu_);
        if (static_cast<int>(live_.size()) >= o_.inflight) {
          continue;  // woken to reclaim ended streams only
        }
      }
      auto* s = new FloodStream(this);
      {
        std::lock_guard lock(mu_);
        live_.insert(s);
        ++started_;
      }
      const std::string token =
          o_.distinct_tokens ? absl::StrFormat("flood-%016x%016x%016x", rng(), rng(), rng())
                             : o_.token;
      s->Start(stubs_[i % stubs_.size()].get(), token,
               absl::StrCat(o_.node_prefix, i % static_cast<uint64_t>(o_.nodes)));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // Streams are deleted only here from now on (OnDone parks them in dead_), so the
    // pointers stay valid while they are cancelled.
    std::vector<FloodStream*> open;
    {
      std::lock_guard lock(mu_);
      open.assign(live_.begin(), live_.end());
      open_at_end_ = static_cast<int64_t>(open.size());
    }
    for (FloodStream* s : open) {
      s->Cancel();
    }
    bool all_done = false;
    {
      std::unique_lock lock(mu_);
      all_done = cv_.wait_for(lock, std::chrono::seconds(10), [&] { return live_.empty(); });
    }
    PrintJson(seconds);
    if (all_done) {
      std::vector<FloodStream*> dead;
      {
        std::lock_guard lock(mu_);
        dead.swap(dead_);
      }
      DeleteAll(dead);
    }
    return all_done;
  }

  void OnAccepted() {
    std::lock_guard lock(mu_);
    ++accepted_;
  }

  void OnEnded(FloodStream* s, const grpc::Status& status, Clock::duration took) {
    {
      std::lock_guard lock(mu_);
      live_.erase(s);
      dead_.push_back(s);
      if (!stopping_) {
        const size_t k = OutcomeOf(status.error_code());
        ++outcomes_[k];
        if (messages_[k].empty()) {
          messages_[k] = absl::StrCat("code ", static_cast<int>(status.error_code()), ": ",
                                      status.error_message());
        }
        ended_ms_.push_back(std::chrono::duration<float, std::milli>(took).count());
      }
    }
    cv_.notify_all();
  }

 private:
  static void DeleteAll(const std::vector<FloodStream*>& streams) {
    for (FloodStream* s : streams) {
      delete s;
    }
  }

  void PrintJson(double seconds) {
    std::lock_guard lock(mu_);
    int64_t ended = 0;
    std::string codes;
    std::string messages;
    for (size_t k = 0; k < kOutcomeNames.size(); ++k) {
      ended += outcomes_[k];
      absl::StrAppend(&codes, k == 0 ? "" : ",", "\"", kOutcomeNames[k], "\":", outcomes_[k]);
      if (!messages_[k].empty()) {
        absl::StrAppend(&messages, messages.empty() ? "" : ",", "\"", kOutcomeNames[k],
                        "\":", JsonString(messages_[k]));
      }
    }
    std::sort(ended_ms_.begin(), ended_ms_.end());
    auto at = [&](double p) -> std::string {
      if (ended_ms_.empty()) {
        return "null";
      }
      const size_t i = std::min(ended_ms_.size() - 1,
                                static_cast<size_t>(p * static_cast<double>(ended_ms_.size())));
      return absl::StrFormat("%.1f", ended_ms_[i]);
    };
    std::printf(
        "{\"duration_s\":%.2f,\"connections\":%d,\"inflight\":%d,\"distinct_tokens\":%s,"
        "\"started\":%lld,\"started_per_s\":%.1f,\"ended\":%lld,\"ended_per_s\":%.1f,"
        "\"codes\":{%s},\"accepted\":%lld,\"open_at_end\":%lld,\"ended_p50_ms\":%s,"
        "\"ended_p99_ms\":%s,\"messages\":{%s}}\n",
        seconds, o_.connections, o_.inflight, o_.distinct_tokens ? "true" : "false",
        static_cast<long long>(started_), static_cast<double>(started_) / seconds,
        static_cast<long long>(ended), static_cast<double>(ended) / seconds, codes.c_str(),
        static_cast<long long>(accepted_), static_cast<long long>(open_at_end_),
        at(0.5).c_str(), at(0.99).c_str(), messages.c_str());
    std::fflush(stdout);
  }

  const SyncFloodOptions o_;
  std::vector<std::unique_ptr<v1::Controller::Stub>> stubs_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_set<FloodStream*> live_;
  std::vector<FloodStream*> dead_;  // ended, deleted by Run (never inside a reaction)
  bool stopping_ = false;
  int64_t started_ = 0;
  int64_t accepted_ = 0;
  int64_t open_at_end_ = 0;
  std::array<int64_t, kOutcomeNames.size()> outcomes_{};
  std::array<std::string, kOutcomeNames.size()> messages_;
  std::vector<float> ended_ms_;
};

void FloodStream::OnReadDone(bool ok) {
  if (ok) {
    // The hello was accepted: count it, and free the slot for the flood.
    flood_->OnAccepted();
    ctx_.TryCancel();
  }
}

void FloodStream::OnDone(const grpc::Status& status) {
  flood_->OnEnded(this, status, Clock::now() - started_);
}

}  // namespace
}  // namespace kmodd::bench

int main(int argc, char** argv) {
  auto options =
      kmodd::bench::ParseSyncFloodOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::cerr << "error: " << options.status().message() << "\n\n"
              << kmodd::bench::kSyncFloodUsage;
    return 2;
  }
  if (!options->help.empty()) {
    std::cout << options->help;
    return 0;
  }
  grpc::SslCredentialsOptions ssl;
  std::ifstream in(options->ca_file);
  if (!in) {
    std::cerr << "error: cannot read --ca " << options->ca_file << "\n";
    return 1;
  }
  std::ostringstream ca;
  ca << in.rdbuf();
  ssl.pem_root_certs = ca.str();
  kmodd::bench::Flood flood(*options, grpc::SslCredentials(ssl));
  if (!flood.Run()) {
    std::cerr << "kmodd-sync-flood: streams still open 10 s after their cancel\n";
    std::_Exit(1);  // gRPC's shutdown would wait for them
  }
  return 0;
}
