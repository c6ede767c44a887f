#pragma once

// N simulated agents in one process, each on its own Sync stream. Streams use gRPC's
// callback API (no thread per stream) and are spread over several channels, each with a
// distinct channel argument so that they do not share one subchannel (one TCP connection).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "kmodd/v1/sync.grpc.pb.h"
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

class SimAgent;

class Fleet {
 public:
  // The channels are made here; nothing connects before Start. `tokens`, when not empty,
  // holds one bearer token per agent, shown on its stream alone.
  Fleet(const Options& options, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
        std::vector<std::string> tokens = {});
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  void Start();
  // Cancels every stream and waits for all of them to end.
  void Stop();

  int agents() const { return static_cast<int>(agents_.size()); }
  int connected() const { return connected_.load(); }         // got their first desired state
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

  // The ACK time of each agent's first changed desired state (for the summary).
  std::vector<int64_t> ChangedAckTimes() const;
  // One JSON line per (agent, desired state received).
  std::string ReportJsonLines() const;
  // The first few stream errors, for a person to read.
  std::vector<std::string> Errors() const;

 private:
  friend class SimAgent;
  void Notify();
  void OnConnected();
  void OnChangedAcked();
  void OnEnded(const std::string& name, const grpc::Status& status);

  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Controller::Stub>> stubs_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
  std::atomic<int> connected_{0};
  std::atomic<int> changed_acked_{0};
  std::atomic<int> ended_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> errors_;
};

}  // namespace kmodd::loadgen
