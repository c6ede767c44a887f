#pragma once

// What the tests of a Module's DaemonSets (and DeviceClasses) share: a Module decoded from
// a spec, and the API server's checks of a Pod's mounts.

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "api/decode.h"
#include "common/json.h"

namespace kmodd::testing {

// Module drivers/gpu (uid `uid`) with `spec` ("spec: ..."), decoded as the source would.
inline api::Module DecodeModule(const std::string& spec,
                                const std::string& uid = "0c0ffee0-0000-4000-8000-000000000001") {
  const std::string text = "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\n"
                           "metadata: {name: gpu, namespace: drivers, uid: " + uid + "}\n" + spec;
  api::Decoded d = api::DecodeDocuments(text, "module.yaml");
  INFO(text);
  REQUIRE(d.errors.empty());
  REQUIRE(d.modules.size() == 1);
  return d.modules[0].object;
}

// A Module for nodes labelled gpu=true whose moduleLoader has `version`; its spec goes on
// (two-space indented spec fields).
inline std::string VersionedLoader(const std::string& version) {
  return "spec:\n  selector: {gpu: \"true\"}\n  moduleLoader:\n    container:\n      version: " +
         version +
         "\n      modprobe: {moduleName: gpu}\n"
         "      kernelMappings: [{regexp: '^.+$', containerImage: 'reg/gpu:" + version + "'}]\n";
}

inline Value Json(const std::string& text) {
  absl::StatusOr<Value> v = ParseJson(text);
  REQUIRE(v.ok());
  return *v;
}

// What the API server checks of a Pod's mounts and volumes ("must be unique", "not found").
inline void CheckMountsAreValid(const Value& ds) {
  const Value* pod = Lookup(ds, {"spec", "template", "spec"});
  REQUIRE(pod != nullptr);
  std::set<std::string> volumes;
  if (const Value* vs = pod->Find("volumes")) {
    for (const Value& v : vs->AsList()) {
      CHECK(volumes.insert(StringAt(v, {"name"})).second);
    }
  }
  for (const char* list : {"initContainers", "containers"}) {
    const Value* cs = pod->Find(list);
    if (cs == nullptr) {
      continue;
    }
    for (const Value& c : cs->AsList()) {
      std::set<std::string> paths;
      if (const Value* ms = c.Find("volumeMounts")) {
        for (const Value& m : ms->AsList()) {
          CHECK(paths.insert(StringAt(m, {"mountPath"})).second);
          CHECK(volumes.count(StringAt(m, {"name"})) == 1);
        }
      }
    }
  }
}

}  // namespace kmodd::testing
