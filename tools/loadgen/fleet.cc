#include "tools/loadgen/fleet.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "node-agent/server/sync_channel_args.h"
#include "tools/loadgen/sim_agent.h"

namespace kmodd::loadgen {

namespace {

constexpr size_t kMaxErrors = 5;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// A random boot id, spelled as /proc/sys/kernel/random/boot_id is.
std::string BootId(std::mt19937_64& rng) {
  const uint64_t a = rng();
  const uint64_t b = rng();
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", a >> 32, (a >> 16) & 0xffff, a & 0xffff,
                         b >> 48, b & 0xffffffffffffULL);
}

}  // namespace

Fleet::Fleet(const Options& o, std::vector<std::shared_ptr<grpc::ChannelCredentials>> credentials,
             std::vector<std::string> tokens)
    : reconnect_(o.reconnect), options_(o), tokens_(std::move(tokens)), jitter_(std::random_device{}()) {
  for (int c = 0; c < o.connections; ++c) {
    // The agent's arguments (its backoff, keepalive and connect deadline), so that what is
    // measured is how agents connect.
    grpc::ChannelArguments args = agent::SyncChannelArguments(agent::BackoffPolicy{});
    if (o.min_connect_timeout_ms > 0) {
      args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, o.min_connect_timeout_ms);
    }
    // Channels with equal arguments share subchannels (and so one TCP connection); a
    // distinct argument and a local subchannel pool keep them apart.
    args.SetInt("kmodd.loadgen.channel", c);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    const auto& creds = credentials.size() == 1 ? credentials[0] : credentials.at(c);
    channels_.push_back(grpc::CreateCustomChannel(o.controller, creds, args));
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
    nodes_.push_back(std::move(node));
  }
  tokens_.resize(nodes_.size());
  agents_.resize(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    states_.push_back(std::make_unique<SimNodeState>());
  }
  ever_connected_.resize(nodes_.size());
  live_since_unix_ms_.resize(nodes_.size());
  backoffs_.assign(nodes_.size(), agent::Backoff(agent::BackoffPolicy{}));
}

Fleet::~Fleet() { Stop(); }

void Fleet::Start() {
  for (int i = 0; i < agents(); ++i) {
    OpenStream(i);
  }
  if (reconnect_ || options_.load_ms > 0) {
    scheduler_ = std::thread([this] { RunScheduler(); });
  }
}

void Fleet::OpenStream(int slot) {
  SimAgent* agent = nullptr;
  {
    std::lock_guard lock(agents_mu_);
    if (agents_[slot]) {
      retired_.push_back(std::move(agents_[slot]));
    }
    agents_[slot] =
        std::make_unique<SimAgent>(this, nodes_[slot], tokens_[slot], slot, states_[slot].get());
    agent = agents_[slot].get();
  }
  {
    std::lock_guard lock(mu_);
    started_unix_ms_.push_back(NowMs());
  }
  // Outside the locks: gRPC may run a reaction (OnDone) before Start returns.
  agent->Start(stubs_[slot % stubs_.size()].get());
}

void Fleet::RunScheduler() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (due_.empty()) {
      scheduler_cv_.wait(lock);
      continue;
    }
    const auto when = due_.begin()->first;
    if (std::chrono::steady_clock::now() < when) {
      scheduler_cv_.wait_until(lock, when);
      continue;
    }
    std::function<void()> fn = std::move(due_.begin()->second);
    due_.erase(due_.begin());
    lock.unlock();
    fn();
    lock.lock();
  }
}

void Fleet::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  scheduler_cv_.notify_all();
  if (scheduler_.joinable()) {
    scheduler_.join();
  }
  // No stream is opened from here on: cancel the current ones and wait for every one.
  std::lock_guard lock(agents_mu_);
  for (auto& a : agents_) {
    if (a) {
      a->Cancel();
    }
  }
  for (auto& a : agents_) {
    if (a) {
      a->WaitDone();
    }
  }
  for (auto& a : retired_) {
    a->WaitDone();
  }
}

int Fleet::ReceivedAtLeast(int k) const {
  std::lock_guard lock(agents_mu_);
  int n = 0;
  for (const auto& a : agents_) {
    if (a && static_cast<int>(a->History().size()) >= k) {
      ++n;
    }
  }
  return n;
}

std::vector<int64_t> Fleet::LiveSinceTimes() const {
  std::lock_guard lock(mu_);
  return live_since_unix_ms_;
}

Fleet::Attempts Fleet::AttemptsSince(int64_t since_unix_ms) const {
  std::lock_guard lock(mu_);
  Attempts a;
  for (int64_t t : started_unix_ms_) {
    a.started += t >= since_unix_ms ? 1 : 0;
  }
  for (const auto& [t, code] : failed_) {
    if (t >= since_unix_ms) {
      ++a.failed;
      a.failed_unavailable += code == grpc::StatusCode::UNAVAILABLE ? 1 : 0;
    }
  }
  return a;
}

std::vector<int64_t> Fleet::ChangedAckTimes() const {
  std::lock_guard lock(agents_mu_);
  std::vector<int64_t> out;
  for (const auto& a : agents_) {
    for (const auto& r : a ? a->History() : std::vector<Received>{}) {
      if (r.changed && r.acked_unix_ms != 0) {
        out.push_back(r.acked_unix_ms);
        break;
      }
    }
  }
  return out;
}

std::string Fleet::ReportJsonLines() const {
  std::lock_guard lock(agents_mu_);
  std::string out;
  for (const auto& a : agents_) {
    for (const auto& r : a ? a->History() : std::vector<Received>{}) {
      absl::StrAppend(&out, "{\"agent\":\"", a->name(), "\",\"version\":\"", r.version,
                      "\",\"modules\":", r.modules, ",\"changed\":", r.changed ? "true" : "false",
                      ",\"received_unix_ms\":", r.received_unix_ms,
                      ",\"acked_unix_ms\":", r.acked_unix_ms, "}\n");
    }
  }
  return out;
}

void Fleet::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      return;
    }
    due_.emplace(std::chrono::steady_clock::now() + delay, std::move(fn));
  }
  scheduler_cv_.notify_all();
}

std::string Fleet::TimelineJsonLines() const {
  std::lock_guard lock(agents_mu_);
  std::string out;
  for (size_t slot = 0; slot < states_.size(); ++slot) {
    // After Stop: no stream writes the states any more.
    for (const PhaseEvent& e : states_[slot]->timeline) {
      absl::StrAppend(&out, "{\"node\":\"", nodes_[slot].name(), "\",\"module\":\"", e.module,
                      "\",\"image\":\"", e.image, "\",\"phase\":\"", e.phase,
                      "\",\"unix_ms\":", e.unix_ms, "}\n");
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

void Fleet::OnConnected(int slot) {
  {
    std::lock_guard lock(mu_);
    if (!ever_connected_[slot]) {
      ever_connected_[slot] = true;
      connected_.fetch_add(1);
    }
    live_since_unix_ms_[slot] = NowMs();
    live_.fetch_add(1);
  }
  cv_.notify_all();
}

void Fleet::OnChangedAcked() {
  changed_acked_.fetch_add(1);
  Notify();
}

void Fleet::OnEnded(int slot, const grpc::Status& status, bool got_desired) {
  ended_.fetch_add(1);
  bool scheduled = false;
  {
    std::lock_guard lock(mu_);
    if (got_desired) {
      live_.fetch_sub(1);
      live_since_unix_ms_[slot] = 0;
    } else if (!stopping_) {
      failed_.emplace_back(NowMs(), status.error_code());
    }
    if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED &&
        errors_.size() < kMaxErrors) {
      errors_.push_back(absl::StrCat(nodes_[slot].name(), ": ", status.error_message()));
    }
    if (reconnect_ && !stopping_) {
      // As SyncClient::Run: a stream the controller answered resets the backoff.
      agent::Backoff& backoff = backoffs_[slot];
      if (got_desired) {
        backoff.Reset();
      }
      const auto delay = backoff.Next(std::uniform_real_distribution<double>(0, 1)(jitter_));
      due_.emplace(std::chrono::steady_clock::now() + delay, [this, slot] { OpenStream(slot); });
      scheduled = true;
    }
  }
  cv_.notify_all();
  if (scheduled) {
    scheduler_cv_.notify_all();
  }
}

}  // namespace kmodd::loadgen
