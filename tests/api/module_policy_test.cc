// ModulePolicy (kmodd.io/v1alpha1, api/module_policy.h): a full document, and a table of
// hostile and mistaken ones, each rejected with the field named; Module revisions.

#include <catch2/catch.hpp>

#include <string>

#include "api/decode.h"
#include "tests/api/policy_rejected.h"

using kmodd::api::Decoded;
using kmodd::api::DecodeDocuments;

namespace {

const char kFull[] = R"(
apiVersion: kmodd.io/v1alpha1
kind: ModulePolicy
metadata:
  name: gpu-rollout
  namespace: drivers
  annotations: {kmodd.io/resumed-revision: abc}
spec:
  moduleName: gpu
  paused: true
  rollout:
    maxParallel: 10%
    canary: {selector: {kmodd.io/canary: "true"}, pause: false, soakSeconds: 600}
    maxFailed: 2
    onFailure: Leave
  drain:
    cordon: false
    resources: [example.com/gpu]
    podSelector: {app: trainer}
    timeoutSeconds: 120
    onTimeout: Proceed
)";

std::string Policy(const std::string& spec) {
  return "apiVersion: kmodd.io/v1alpha1\nkind: ModulePolicy\nmetadata: {name: p, namespace: ns}\n"
         "spec:\n" + spec;
}

}  // namespace

TEST_CASE("ModulePolicy: every field read") {
  const Decoded d = DecodeDocuments(kFull, "policy.yaml");
  REQUIRE(d.errors.empty());
  CHECK(d.warnings.empty());
  REQUIRE(d.policies.size() == 1);
  const kmodd::api::ModulePolicy& p = d.policies[0].object;
  CHECK(p.Key() == "drivers/gpu-rollout");
  CHECK(p.ModuleKey() == "drivers/gpu");
  CHECK(p.paused);
  CHECK(p.Annotation(kmodd::api::kResumedRevisionAnnotation) == "abc");
  REQUIRE(p.rollout.max_parallel.has_value());
  CHECK(p.rollout.max_parallel->percent == 10);
  REQUIRE(p.rollout.max_failed.has_value());
  CHECK(p.rollout.max_failed->count == 2);
  CHECK_FALSE(p.rollout.max_failed->percent.has_value());
  CHECK(p.rollout.canary_selector.at("kmodd.io/canary") == "true");
  CHECK_FALSE(p.rollout.canary_pause);
  CHECK(p.rollout.canary_soak_seconds == 600);
  CHECK(p.rollout.on_failure == kmodd::api::OnFailure::kLeave);
  REQUIRE(p.drain.has_value());
  CHECK_FALSE(p.drain->cordon);
  CHECK(p.drain->resources == std::vector<std::string>{"example.com/gpu"});
  CHECK(p.drain->pod_selector.at("app") == "trainer");
  CHECK(p.drain->timeout_seconds == 120);
  CHECK(p.drain->on_timeout == kmodd::api::OnDrainTimeout::kProceed);
}

TEST_CASE("ModulePolicy: hostile and mistaken documents are rejected - naming the field") {
  struct Case {
    const char* what;
    std::string text;
    const char* path;     // the field the error names
    const char* message;  // part of its message
  };
  const Case cases[] = {
      {"no module", Policy("  paused: true\n"), "spec.moduleName", "required"},
      {"module name not a name", Policy("  moduleName: ../etc\n"), "spec.moduleName", "not a Module name"},
      {"maxParallel zero", Policy("  moduleName: m\n  rollout: {maxParallel: 0}\n"),
       "spec.rollout.maxParallel", "never update"},
      {"maxParallel 0%", Policy("  moduleName: m\n  rollout: {maxParallel: 0%}\n"),
       "spec.rollout.maxParallel", "never update"},
      {"maxParallel negative", Policy("  moduleName: m\n  rollout: {maxParallel: -3}\n"),
       "spec.rollout.maxParallel", "a percentage"},
      {"maxParallel over 100%", Policy("  moduleName: m\n  rollout: {maxParallel: 150%}\n"),
       "spec.rollout.maxParallel", "at most 100%"},
      {"maxFailed not a number", Policy("  moduleName: m\n  rollout: {maxFailed: lots}\n"),
       "spec.rollout.maxFailed", "a number of nodes"},
      {"maxFailed huge", Policy("  moduleName: m\n  rollout: {maxFailed: 99999999999999999999999}\n"),
       "spec.rollout.maxFailed", "a number of nodes"},
      {"maxParallel a list", Policy("  moduleName: m\n  rollout: {maxParallel: [1]}\n"),
       "spec.rollout.maxParallel", "expected a number or a string"},
      {"count and selector", Policy("  moduleName: m\n  rollout: {canary: {count: 1, selector: {a: b}}}\n"),
       "spec.rollout.canary", "not both"},
      {"negative canary count", Policy("  moduleName: m\n  rollout: {canary: {count: -1}}\n"),
       "spec.rollout.canary.count", "negative"},
      {"bad selector key", Policy("  moduleName: m\n  rollout: {canary: {selector: {\"a b\": x}}}\n"),
       "spec.rollout.canary.selector.a b", ""},
      {"bad selector value", Policy("  moduleName: m\n  rollout: {canary: {selector: {a: \"x y\"}}}\n"),
       "spec.rollout.canary.selector.a", "label value"},
      {"soak without canaries", Policy("  moduleName: m\n  rollout: {canary: {soakSeconds: 5}}\n"),
       "spec.rollout.canary", "which nodes are the canaries"},
      {"negative soak", Policy("  moduleName: m\n  rollout: {canary: {count: 1, soakSeconds: -5}}\n"),
       "spec.rollout.canary.soakSeconds", "negative"},
      {"soak of years", Policy("  moduleName: m\n  rollout: {canary: {count: 1, soakSeconds: 99999999}}\n"),
       "spec.rollout.canary.soakSeconds", "30 days"},
      {"unknown onFailure", Policy("  moduleName: m\n  rollout: {onFailure: Reboot}\n"),
       "spec.rollout.onFailure", "Rollback"},
      {"drain resource not a name", Policy("  moduleName: m\n  drain: {resources: [\"a b/c\"]}\n"),
       "spec.drain.resources[0]", "not a resource name"},
      {"drain resource not extended", Policy("  moduleName: m\n  drain: {resources: [cpu]}\n"),
       "spec.drain.resources[0]", "not an extended resource"},
      {"drain selector value", Policy("  moduleName: m\n  drain: {podSelector: {app: \"x y\"}}\n"),
       "spec.drain.podSelector.app", "label value"},
      {"drain timeout zero", Policy("  moduleName: m\n  drain: {timeoutSeconds: 0}\n"),
       "spec.drain.timeoutSeconds", "expected 1"},
      {"drain onTimeout unknown", Policy("  moduleName: m\n  drain: {onTimeout: Wait}\n"),
       "spec.drain.onTimeout", "Proceed"},
      {"paused not a boolean", Policy("  moduleName: m\n  paused: maybe\n"), "spec.paused", ""},
      {"spec a list", Policy("  - moduleName: m\n"), "spec", "mapping"},
      {"another apiVersion",
       "apiVersion: kmodd.io/v2\nkind: ModulePolicy\nmetadata: {name: p}\nspec: {moduleName: m}\n",
       "apiVersion", "kmodd.io/v1alpha1"},
      {"bad name",
       "apiVersion: kmodd.io/v1alpha1\nkind: ModulePolicy\nmetadata: {name: P_Q}\nspec: {moduleName: m}\n",
       "metadata.name", "RFC 1123"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    kmodd::testing::ExpectPolicyRejected(c.text, c.path, c.message);
  }
}

TEST_CASE("ModulePolicy: an unknown field is a warning naming it") {
  const Decoded d = DecodeDocuments(Policy("  moduleName: m\n  rollout: {maxParalel: 3}\n"), "p.yaml");
  CHECK(d.errors.empty());
  REQUIRE(d.warnings.size() == 1);
  CHECK(d.warnings[0].path == "spec.rollout.maxParalel");
}

TEST_CASE("Module revision: the same spec the same revision - in YAML or JSON: any change a new one") {
  const std::string yaml = R"(
apiVersion: kmm.sigs.x-k8s.io/v1beta1
kind: Module
metadata: {name: m, namespace: ns, labels: {a: b}}
spec:
  selector: {x: "y"}
  moduleLoader: {container: {modprobe: {moduleName: m}, kernelMappings: [{regexp: '^.*$', containerImage: 'r/m:1'}]}}
)";
  const std::string json = R"({"apiVersion": "kmm.sigs.x-k8s.io/v1beta1", "kind": "Module",
  "metadata": {"name": "m", "namespace": "ns"},
  "spec": {"selector": {"x": "y"}, "moduleLoader": {"container": {"modprobe": {"moduleName": "m"},
  "kernelMappings": [{"regexp": "^.*$", "containerImage": "r/m:1"}]}}}})";
  const Decoded a = DecodeDocuments(yaml, "a.yaml");
  const Decoded b = DecodeDocuments(json, "b.json");
  REQUIRE(a.modules.size() == 1);
  REQUIRE(b.modules.size() == 1);
  CHECK(a.modules[0].object.revision.size() == 12);
  CHECK(a.modules[0].object.revision == b.modules[0].object.revision);  // labels are not spec
  std::string changed = yaml;
  changed.replace(changed.find("r/m:1"), 5, "r/m:2");
  const Decoded c = DecodeDocuments(changed, "c.yaml");
  REQUIRE(c.modules.size() == 1);
  CHECK(c.modules[0].object.revision != a.modules[0].object.revision);
}
