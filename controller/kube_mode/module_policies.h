#pragma once

// Kubernetes mode: the ModulePolicy objects (kmodd.io/v1alpha1, every namespace) as the
// list/watch delivers them, indexed by the Module each governs. Pure: the caller feeds
// the list and the events and hands the result to the Hub (Hub::SetPolicies).
//
// A policy object that does not decode or validate (written while no webhook ran) is left
// out and its problem kept for the log; two policies naming one Module: the one whose name
// sorts first governs it, the other is reported.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/value.h"
#include "api/module_policy.h"
#include "controller/kube/client.h"

namespace kmodd::source {

class PolicyIndex {
 public:
  // A (re)list: every policy object. Returns the policies by Module key.
  std::map<std::string, api::ModulePolicy> Sync(const std::vector<Value>& objects);
  // One event; the policies by Module key when they changed, else nullopt.
  std::optional<std::map<std::string, api::ModulePolicy>> Apply(kube::EventType type,
                                                                const Value& object);
  // The problems of the objects left out, one sentence each, naming the object; the ones
  // new since the last call.
  std::vector<std::string> TakeProblems();

 private:
  void Absorb(const Value& object);
  std::map<std::string, api::ModulePolicy> ByModule();

  std::map<std::string, api::ModulePolicy> objects_;  // by "<namespace>/<name>"
  std::map<std::string, std::string> problems_;       // by object key: its problem
  std::map<std::string, std::string> told_;           // the problems last returned
  std::map<std::string, api::ModulePolicy> last_;     // the last result
};

}  // namespace kmodd::source
