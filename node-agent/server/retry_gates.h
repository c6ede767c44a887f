#pragma once

// The retry state of what the reconciler acts on, by key: a Module ("namespace/name"), an
// in-tree module's reload (its name), or the kernel observation ("/observe"). After a
// failure the key waits, with capped, jittered backoff (backoff.h), or, after a terminal
// error, until something changes (a new desired state, a new spec, an override). Pure: the
// time and the jitter are inputs; the reconciler holds it under its lock.

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "api/node_modules_config.h"
#include "common/clock.h"
#include "node-agent/server/backoff.h"

namespace kmodd::agent {

class RetryGates {
 public:
  using Time = Clock::Monotonic;

  explicit RetryGates(BackoffPolicy policy) : policy_(policy) {}

  // Whether `key` may be acted on at `now`.
  bool Open(const std::string& key, Time now) const;
  // The earliest opening of a gate later than `after`; none when no gate opens after it
  // (terminal gates wait for a change, not for time). The reconciler passes the start of
  // its last pass: a gate that opened while that pass ran was still closed when the pass
  // looked, so it wakes the worker at once, while one that was open then (and left alone,
  // its action no longer planned) wakes nobody.
  std::optional<Time> NextOpening(Time after) const;

  // An action on `key` ended with `s` at `now`. Success clears the key. A failure closes
  // it for the next backoff step (jittered by `unit`, in [0, 1)), or until a change when
  // terminal. `spec` is what the failure is about, when the key is a Module's (a new spec
  // reopens it, ForgetChanged); an in-tree reload's failure (`in_tree`) is not kept as a
  // Module's error (it is logged and is an event instead).
  void Record(const std::string& key, const absl::Status& s, Time now, double unit,
              const std::optional<api::NodeModuleSpec>& spec, bool in_tree);
  // Closes `key` until `until` without counting an attempt (a failed kernel observation).
  void Hold(const std::string& key, Time until);
  // Forgets `key`'s gate and error.
  void Clear(const std::string& key);
  // Forgets the in-tree reloads' gates: a new desired state is the change they wait for.
  void ClearInTree();
  // Forgets `spec`'s Module's gate and error when they were about another spec.
  void ForgetChanged(const api::NodeModuleSpec& spec);

  // The last failure of a Module (ok: none since its last success or change).
  absl::Status LastError(const std::string& key) const;
  // Whether a failure of `key` will be retried by time (a gate that is not terminal).
  bool RetryScheduled(const std::string& key) const;

 private:
  struct Gate {
    std::optional<api::NodeModuleSpec> spec;
    int attempt = 0;
    Time next;
    bool terminal = false;
    bool in_tree = false;
  };

  BackoffPolicy policy_;
  std::map<std::string, Gate> gates_;
  std::map<std::string, absl::Status> errors_;
};

}  // namespace kmodd::agent
