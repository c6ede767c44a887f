#pragma once

// N simulated agents in one process, each on its own Sync stream. Streams use gRPC's
// callback API (no thread per stream) and are spread over several channels, each with a
// distinct channel argument so that they do not share one subchannel (one TCP connection).
// Channels have the agent's channel arguments (node-agent/server/sync_channel_args.h).
// With --reconnect, a stream that ends is reopened after the agent's backoff by one
// scheduler thread; the streams it replaced are kept until the fleet is destroyed.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "kmodd/v1/sync.grpc.pb.h"
#include "node-agent/server/backoff.h"
#include "tools/loadgen/options.h"

namespace kmodd::loadgen {

// One desired state as one agent saw it.
struct Received {
  std::string version;
  int modules = 0;
  bool changed = false;  // its modules differ from the previous desired state's
  int64_t received_unix_ms = 0;
  int64_t acked_unix_ms = 0;  // when the ACK was handed to the transport; 0 = not yet
};

// One module phase change a simulated agent reported.
struct PhaseEvent {
  std::string module;
  std::string image;
  std::string phase;
  int64_t unix_ms = 0;
};

// What one simulated node runs, kept across its streams (as an agent keeps its state when
// the controller goes away): the modules it was last given and their phase, the desired
// state they answer, and every phase change. Read and written under the current stream's
// SimAgent lock: a slot's streams follow one another.
struct SimModule {
  std::string spec;  // the entry it was last given, serialized
  std::string phase;
  std::string image;
  std::string version;
  std::string kernel_module;
  int64_t since = 0;
};
struct SimNodeState {
  std::map<std::string, SimModule> modules;  // by "<namespace>/<name>"
  std::string desired_version;
  std::vector<PhaseEvent> timeline;
};

class SimAgent;

class Fleet {
 public:
  // The channels are made here; nothing connects before Start. `credentials` holds one
  // for every channel, or one per channel (--cert-dir). `tokens`, when not empty, holds one
  // bearer token per agent, shown on its stream alone.
  Fleet(const Options& options, std::vector<std::shared_ptr<grpc::ChannelCredentials>> credentials,
        std::vector<std::string> tokens = {});
  Fleet(const Options& options, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
        std::vector<std::string> tokens = {})
      : Fleet(options, std::vector{credentials}, std::move(tokens)) {}
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  void Start();
  // Cancels every stream and waits for all of them to end.
  void Stop();

  int agents() const { return static_cast<int>(nodes_.size()); }
  int connected() const { return connected_.load(); }         // got their first desired state
  int live() const { return live_.load(); }  // their current stream got a desired state
  int changed_acked() const { return changed_acked_.load(); }  // ACKed a changed one
  int ended() const { return ended_.load(); }                  // streams that ended
  // Agents that have received at least `k` desired states.
  int ReceivedAtLeast(int k) const;

  // Blocks until `done()` or `deadline`, re-checking on every change and every 100 ms.
  template <typename Pred>
  bool WaitUntil(Pred done, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mu_);
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
    return true;
  }

  // When each agent's current stream received its first desired state (0: not yet).
  std::vector<int64_t> LiveSinceTimes() const;
  // Streams opened, and streams that ended before any desired state (a failed attempt:
  // refused, handshake cut off, ...), from `since_unix_ms` on.
  struct Attempts {
    int started = 0;
    int failed = 0;
    int failed_unavailable = 0;  // of which with status UNAVAILABLE
  };
  Attempts AttemptsSince(int64_t since_unix_ms) const;

  // The ACK time of each agent's first changed desired state (for the summary).
  std::vector<int64_t> ChangedAckTimes() const;
  // --timeline: one JSON line per module phase change an agent reported.
  std::string TimelineJsonLines() const;
  // One JSON line per (agent, desired state received).
  std::string ReportJsonLines() const;
  // The first few stream errors, for a person to read.
  std::vector<std::string> Errors() const;

 private:
  friend class SimAgent;
  void Notify();
  void OnConnected(int slot);
  void OnChangedAcked();
  void OnEnded(int slot, const grpc::Status& status, bool got_desired);
  // Opens a new stream for `slot` (its first, or after the previous one ended).
  void OpenStream(int slot);
  void RunScheduler();
  // Runs `fn` on the scheduler thread after `delay` (not after Stop).
  void After(std::chrono::milliseconds delay, std::function<void()> fn);

  const bool reconnect_;
  const Options options_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Controller::Stub>> stubs_;
  std::vector<v1::NodeInfo> nodes_;
  std::vector<std::string> tokens_;
  std::atomic<int> connected_{0};
  std::atomic<int> live_{0};
  std::atomic<int> changed_acked_{0};
  std::atomic<int> ended_{0};

  // The current stream of each agent, and the ones it replaced. Lock order: mu_ before
  // agents_mu_ (WaitUntil's predicates read the agents).
  mutable std::mutex agents_mu_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
  std::vector<std::unique_ptr<SimAgent>> retired_;
  std::vector<std::unique_ptr<SimNodeState>> states_;  // one per slot, for good

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> errors_;
  std::vector<bool> ever_connected_;
  std::vector<int64_t> live_since_unix_ms_;
  std::vector<int64_t> started_unix_ms_;
  std::vector<std::pair<int64_t, grpc::StatusCode>> failed_;
  std::vector<agent::Backoff> backoffs_;
  std::mt19937_64 jitter_;
  // Work due at a time: reopening a stream, a slow load's end.
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> due_;
  bool stopping_ = false;
  std::condition_variable scheduler_cv_;
  std::thread scheduler_;
};

}  // namespace kmodd::loadgen
