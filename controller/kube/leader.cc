#include "controller/kube/leader.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "controller/kube/time_format.h"

namespace kmodd::kube {

LeaderElector::LeaderElector(KubeClient& client, LeaderElectionConfig config, const Clock& clock)
    : client_(client), config_(std::move(config)), clock_(clock) {}

std::string LeaderElector::Path() const {
  return ResourcePath("coordination.k8s.io/v1", "leases", config_.lease_namespace,
                      config_.lease_name);
}

Value LeaderElector::NewSpec(absl::Time now, const Value* old) const {
  const bool renewing = old != nullptr && StringAt(*old, {"holderIdentity"}) == config_.identity;
  const int64_t transitions = old != nullptr ? IntAt(*old, {"leaseTransitions"}) : 0;
  Value spec;
  spec.Set("holderIdentity", config_.identity);
  spec.Set("leaseDurationSeconds", absl::ToInt64Seconds(config_.lease_duration));
  spec.Set("acquireTime", renewing && !StringAt(*old, {"acquireTime"}).empty()
                              ? StringAt(*old, {"acquireTime"})
                              : FormatKubeMicroTime(now));
  spec.Set("renewTime", FormatKubeMicroTime(now));
  // Every change of holder counts, a take-over of a released lease included.
  spec.Set("leaseTransitions", renewing || old == nullptr ? transitions : transitions + 1);
  return spec;
}

absl::Status LeaderElector::TryAcquireOrRenew(absl::Time now) {
  if (config_.identity.empty() || config_.lease_name.empty()) {
    return absl::InvalidArgumentError("leader election needs an identity and a lease name");
  }
  absl::StatusOr<Value> lease = client_.Get(Path());
  if (!lease.ok() && lease.status().code() == absl::StatusCode::kNotFound) {
    Value metadata;
    metadata.Set("name", config_.lease_name);
    metadata.Set("namespace", config_.lease_namespace);
    Value object;
    object.Set("apiVersion", "coordination.k8s.io/v1");
    object.Set("kind", "Lease");
    object.Set("metadata", std::move(metadata));
    object.Set("spec", NewSpec(now, nullptr));
    absl::StatusOr<Value> created = client_.Create(
        ResourcePath("coordination.k8s.io/v1", "leases", config_.lease_namespace), object);
    if (!created.ok()) {
      return created.status();  // AlreadyExists: another replica was quicker
    }
    lease = std::move(created);
  } else if (!lease.ok()) {
    return lease.status();
  } else {
    const Value* spec = lease->Find("spec");
    const Value old = spec != nullptr ? *spec : Value::EmptyMap();
    const std::string seen = ToJsonLine(old);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (seen != observed_spec_) {
        observed_spec_ = seen;
        observed_time_ = now;
        observed_holder_ = StringAt(old, {"holderIdentity"});
        observed_duration_ = absl::Seconds(IntAt(old, {"leaseDurationSeconds"}));
      }
      if (!observed_holder_.empty() && observed_holder_ != config_.identity &&
          now < observed_time_ + observed_duration_) {
        return absl::FailedPreconditionError(
            absl::StrCat("lease ", config_.lease_namespace, "/", config_.lease_name,
                         " is held by ", observed_holder_));
      }
    }
    // The resourceVersion in the body makes this update fail (Aborted) if anyone wrote the
    // lease since we read it.
    absl::StatusOr<Value> updated = client_.Update(Path(), With(*lease, "spec", NewSpec(now, &old)));
    if (!updated.ok()) {
      return updated.status();
    }
    lease = std::move(updated);
  }
  std::lock_guard<std::mutex> lock(mu_);
  const Value* spec = lease->Find("spec");
  observed_spec_ = spec != nullptr ? ToJsonLine(*spec) : "";
  observed_time_ = now;
  observed_holder_ = config_.identity;
  observed_duration_ = config_.lease_duration;
  return absl::OkStatus();
}

absl::Status LeaderElector::Step() {
  const absl::Time now = clock_.Now();
  absl::Status st = TryAcquireOrRenew(now);
  bool started = false;
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (st.ok()) {
      started = !leading_;
      leading_ = true;
      last_renew_ = now;
    } else if (leading_ && clock_.Now() - last_renew_ >= config_.renew_deadline) {
      leading_ = false;
      stopped = true;
    }
  }
  if (started && config_.on_started_leading) {
    config_.on_started_leading();
  }
  if (stopped && config_.on_stopped_leading) {
    config_.on_stopped_leading();
  }
  return st;
}

bool LeaderElector::IsLeader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leading_ && clock_.Now() - last_renew_ < config_.renew_deadline;
}

std::string LeaderElector::observed_holder() const {
  std::lock_guard<std::mutex> lock(mu_);
  return observed_holder_;
}

absl::Status LeaderElector::Release() {
  absl::StatusOr<Value> lease = client_.Get(Path());
  if (!lease.ok()) {
    return lease.status();
  }
  const Value* spec = lease->Find("spec");
  if (spec == nullptr || StringAt(*spec, {"holderIdentity"}) != config_.identity) {
    return absl::OkStatus();
  }
  // As client-go does: no holder, and a one-second duration for readers that only look at
  // the times.
  Value released = With(*spec, "holderIdentity", "");
  released = With(released, "leaseDurationSeconds", 1);
  released = With(released, "renewTime", FormatKubeMicroTime(clock_.Now()));
  absl::StatusOr<Value> updated = client_.Update(Path(), With(*lease, "spec", released));
  return updated.status();
}

void LeaderElector::Run(http::Cancellation& stop) {
  const auto period = absl::ToChronoMilliseconds(config_.retry_period);
  while (!stop.cancelled()) {
    (void)Step();  // the outcome is in IsLeader(); errors are expected while following
    auto wait = period;
    if (!IsLeader()) {
      // Candidates spread their attempts (client-go's jitter factor 1.2).
      std::uniform_real_distribution<double> jitter(0.0, 1.2);
      wait += std::chrono::milliseconds(
          static_cast<int64_t>(static_cast<double>(period.count()) * jitter(random_)));
    }
    if (stop.WaitFor(wait, clock_)) {  // renewals on the injected clock, as every reading
      break;
    }
  }
  bool was_leading = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_leading = leading_;
    leading_ = false;
  }
  if (was_leading) {
    (void)Release();  // best effort: otherwise the lease simply expires
    if (config_.on_stopped_leading) {
      config_.on_stopped_leading();
    }
  }
}

}  // namespace kmodd::kube
