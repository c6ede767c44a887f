#pragma once

// Bounds on what one client can hold open on the Sync port (issue 12 A1, B2): how many
// connections a peer address may carry streams on, and how long a stream authenticated by
// a token may live (no longer than the token).

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/server/hub.h"

namespace kmodd::server {

// The address part of a gRPC peer string: "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7",
// "ipv6:[fd00::1]:443" -> "ipv6:[fd00::1]". A string without a port is its own host.
std::string PeerHost(std::string_view peer);

// Counts streams per connection (a gRPC peer string names one: address and source port)
// and connections with streams per peer address. Thread-safe.
class PeerLimiter {
 public:
  // 0: no limit.
  explicit PeerLimiter(int max_connections_per_peer) : max_(max_connections_per_peer) {}

  // True, and counted, when a stream on connection `peer` is within the limit: its
  // connection already carries one, or its address has fewer than the maximum. Each true
  // needs one Release.
  [[nodiscard]] bool Admit(const std::string& peer);
  void Release(const std::string& peer);

  int connections(const std::string& host) const;

 private:
  const int max_;
  mutable std::mutex mu_;
  std::map<std::string, int> streams_;      // peer -> streams open on it
  std::map<std::string, int> connections_;  // host -> peers with streams
};

// Ends streams when their credential expires: each stream registered with a time is
// closed (UNAUTHENTICATED, so the agent dials again with its refreshed token) when the
// clock's wall time reaches it. A stream leaves with Remove before it is destroyed.
class StreamDeadlines {
 public:
  explicit StreamDeadlines(const Clock& clock);
  ~StreamDeadlines();
  StreamDeadlines(const StreamDeadlines&) = delete;
  StreamDeadlines& operator=(const StreamDeadlines&) = delete;

  // `until` InfiniteFuture: nothing to do.
  void Set(AgentStream* stream, absl::Time until);
  void Remove(AgentStream* stream);
  size_t size() const;

 private:
  void Run();

  const Clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<AgentStream*, absl::Time> until_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  uint64_t changes_ = 0;                      // guarded by mu_: wakes the waiter
  std::thread thread_;
};

}  // namespace kmodd::server
