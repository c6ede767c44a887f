#include "tools/loadgen/fleet.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/loadgen/sim_agent.h"

namespace kmodd::loadgen {

namespace {

constexpr size_t kMaxErrors = 5;

// A random boot id, spelled as /proc/sys/kernel/random/boot_id is.
std::string BootId(std::mt19937_64& rng) {
  const uint64_t a = rng();
  const uint64_t b = rng();
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                         b >> 48, b & 0xffffffffffffULL);
}

}  // namespace

Fleet::Fleet(const Options& o, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
             std::vector<std::string> tokens) {
  for (int c = 0; c < o.connections; ++c) {
    grpc::ChannelArguments args;
    // Channels with equal arguments share subchannels (and so one TCP connection); a
    // distinct argument and a local subchannel pool keep them apart.
    args.SetInt("kmodd.loadgen.channel", c);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channels_.push_back(grpc::CreateCustomChannel(o.controller, credentials, args));
    stubs_.push_back(v1::Controller::NewStub(channels_.back()));
  }
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < o.agents; ++i) {
    v1::NodeInfo node;
    node.set_name(absl::StrCat(o.name_prefix, i));
    for (const auto& [k, v] : o.labels) {
      (*node.mutable_labels())[k] = v;
    }
    node.set_kernel_release(o.kernel);
    node.set_boot_id(BootId(rng));
    node.set_architecture("amd64");
    node.set_lockdown("none");
    node.set_agent_version("kmodd-loadgen");
    node.set_os_image("kmodd-loadgen simulated node");
    agents_.push_back(std::make_unique<SimAgent>(
        this, std::move(node), i < static_cast<int>(tokens.size()) ? std::move(tokens[i]) : ""));
  }
}

Fleet::~Fleet() { Stop(); }

void Fleet::Start() {
  for (size_t i = 0; i < agents_.size(); ++i) {
    agents_[i]->Start(stubs_[i % stubs_.size()].get());
  }
}

void Fleet::Stop() {
  for (auto& a : agents_) {
    a->Cancel();
  }
  for (auto& a : agents_) {
    a->WaitDone();
  }
}

int Fleet::ReceivedAtLeast(int k) const {
  int n = 0;
  for (const auto& a : agents_) {
    if (static_cast<int>(a->History().size()) >= k) {
      ++n;
    }
  }
  return n;
}

std::vector<int64_t> Fleet::ChangedAckTimes() const {
  std::vector<int64_t> out;
  for (const auto& a : agents_) {
    for (const auto& r : a->History()) {
      if (r.changed && r.acked_unix_ms != 0) {
        out.push_back(r.acked_unix_ms);
        break;
      }
    }
  }
  return out;
}

std::string Fleet::ReportJsonLines() const {
  std::string out;
  for (const auto& a : agents_) {
    for (const auto& r : a->History()) {
      absl::StrAppend(&out, "{\"agent\":\"", a->name(), "\",\"version\":\"", r.version,
                      "\",\"modules\":", r.modules, ",\"changed\":", r.changed ? "true" : "false",
                      ",\"received_unix_ms\":", r.received_unix_ms,
                      ",\"acked_unix_ms\":", r.acked_unix_ms, "}\n");
    }
  }
  return out;
}

std::vector<std::string> Fleet::Errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}

void Fleet::Notify() {
  // Taking the lock orders the counter update before the waiter's re-check.
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
}

void Fleet::OnConnected() {
  connected_.fetch_add(1);
  Notify();
}

void Fleet::OnChangedAcked() {
  changed_acked_.fetch_add(1);
  Notify();
}

void Fleet::OnEnded(const std::string& name, const grpc::Status& status) {
  ended_.fetch_add(1);
  {
    std::lock_guard lock(mu_);
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED &&
        errors_.size() < kMaxErrors) {
      errors_.push_back(absl::StrCat(name, ": ", status.error_message()));
    }
  }
  cv_.notify_all();
}

}  // namespace kmodd::loadgen
