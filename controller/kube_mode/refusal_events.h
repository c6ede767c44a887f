#pragma once

// What the API server (or a name already taken) refuses a Module's writer duty, told on
// the Module: logged each time, a Warning Event with `reason` once per message for each
// subject the duty writes (its DaemonSet, each DeviceClass), so that a refusal retried with
// the key's backoff does not pile up Events, and two subjects refused at once do not
// re-event each other. A subject written again is forgotten, so that a later refusal of the
// same words is told again. Thread-safe.

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "controller/kube/events.h"
#include "controller/kube_mode/kube_source.h"
#include "controller/server/status.h"

namespace kmodd::server {

class RefusalEvents {
 public:
  // `reason`: the Events' reason (DevicePluginRefused); `what`: the log message's subject.
  RefusalEvents(kube::EventRecorder& events, Logger& log, std::string reason, std::string what);

  void Refused(const source::ModuleMeta& meta, const std::string& subject,
               const std::string& message);
  // `subject` of Module `key` was written.
  void Cleared(const std::string& key, const std::string& subject);
  // Nothing of Module `key` is wanted any more.
  void Forget(const std::string& key);
  // Leadership lost: Events are made again by the next leader.
  void Reset();
  // The messages of Module `key`'s subjects refused now (not written since), by subject.
  std::vector<std::string> Current(const std::string& key);

 private:
  kube::EventRecorder& events_;
  Logger& log_;
  const std::string reason_;
  const std::string what_;
  std::mutex mu_;
  // Module key -> subject -> the last message evented
  std::map<std::string, std::map<std::string, std::string>> refused_;
  // Module key -> subject -> its refusal now (whether or not evented)
  std::map<std::string, std::map<std::string, std::string>> current_;
};

// A Module's condition `type` (DevicePluginAccepted, DraAccepted) from its refusals: False,
// reason Refused, their messages, while anything is refused; else True, reason Written.
Condition AcceptedCondition(RefusalEvents& refusals, const std::string& key,
                            const std::string& type, const std::string& written);

}  // namespace kmodd::server
