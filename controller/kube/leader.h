#pragma once

// Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules and timings:
// a replica takes the lease when it is free or when its holder has not renewed it for
// leaseDuration as seen by this replica's own clock (no cross-node clock comparison);
// the leader renews every retryPeriod and gives up leading when renewDeadline passes
// without a successful renew, which is before any other replica can take the lease.

#include <functional>
#include <mutex>
#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/http/cancel.h"
#include "controller/kube/client.h"
#include "common/clock.h"

namespace kmodd::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per replica (pod name)
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  // Called on the electing thread when leading starts and when it stops (lost or released).
  std::function<void()> on_started_leading;
  std::function<void()> on_stopped_leading;
};

class LeaderElector {
 public:
  // InvalidArgument-free by construction: an empty identity or lease name is a programming
  // error and fails every Step.
  LeaderElector(KubeClient& client, LeaderElectionConfig config, const Clock& clock);

  // One attempt to take or renew the lease. Call every retry_period (Run does). Returns
  // the attempt's error (Aborted on a lost race, FailedPrecondition while another replica
  // holds the lease), which only matters for logging: the state is in IsLeader().
  absl::Status Step();

  // Steps until `stop`, then releases the lease if held so the next leader need not wait
  // out the lease duration.
  void Run(http::Cancellation& stop);

  // True only within renew_deadline of the last successful renew, even while a slow
  // request is in flight: act as leader only while this holds.
  bool IsLeader() const;
  std::string observed_holder() const;

  // Clears the holder if this replica holds the lease.
  absl::Status Release();

 private:
  absl::Status TryAcquireOrRenew(absl::Time now);
  std::string Path() const;
  Value NewSpec(absl::Time now, const Value* old) const;

  KubeClient& client_;
  const LeaderElectionConfig config_;
  const Clock& clock_;
  std::mt19937 random_{std::random_device{}()};

  mutable std::mutex mu_;
  bool leading_ = false;         // callbacks' view: started and not yet stopped
  absl::Time last_renew_;        // when the last successful attempt started
  std::string observed_spec_;    // the lease spec as last seen, serialized
  absl::Time observed_time_;     // when it was first seen as it is, on our clock
  std::string observed_holder_;
  absl::Duration observed_duration_;
};

}  // namespace kmodd::kube
