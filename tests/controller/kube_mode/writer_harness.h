#pragma once

// A Module writer duty (device_plugin_writer.h, dra_writer.h) on the fake API server, for
// Module drivers/gpu (uid u-1) as the source watches it and as the hub has it in force.

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/log.h"
#include "controller/kube/events.h"
#include "tests/controller/kube_mode/fake_writer_view.h"
#include "tests/controller/kube_mode/module_fixtures.h"
#include "tests/fakes/fake_clock.h"
#include "tests/fakes/fake_kube_client.h"

namespace kmodd::testing {

template <typename Writer>
struct WriterHarness {
  WriterHarness()
      : devnull(std::fopen("/dev/null", "w")), log(devnull), events(api, clock, "kmm", "t"),
        writer(api, events, log) {
    source::ModuleMeta meta;
    meta.ns = "drivers";
    meta.name = "gpu";
    meta.uid = "u-1";
    view.metas["drivers/gpu"] = meta;
  }
  ~WriterHarness() { std::fclose(devnull); }
  WriterHarness(const WriterHarness&) = delete;
  WriterHarness& operator=(const WriterHarness&) = delete;

  void Set(const std::string& spec) { view.objects["drivers/gpu"] = DecodeModule(spec, "u-1"); }
  server::ReconcileResult Run() { return writer.Reconcile(view, "drivers/gpu"); }
  std::vector<Value> Objects(const std::string& collection) {
    std::vector<Value> out;
    for (auto& [name, o] : api.Objects(collection)) {
      out.push_back(o);
    }
    return out;
  }
  // The POSTs, PUTs and DELETEs made in `collection`.
  size_t Writes(const std::string& collection) {
    size_t n = 0;
    for (const std::string& c : api.calls()) {
      for (const char* verb : {"POST ", "PUT ", "DELETE "}) {
        n += c.rfind(verb + collection, 0) == 0 ? 1 : 0;
      }
    }
    return n;
  }
  // "Reason: message" of each Event in the Module's namespace.
  std::vector<std::string> ModuleEvents() {
    std::vector<std::string> out;
    for (const auto& [name, e] : api.Objects(kube::ResourcePath("v1", "events", "drivers"))) {
      out.push_back(StringAt(e, {"reason"}) + ": " + StringAt(e, {"message"}));
    }
    return out;
  }

  std::FILE* devnull;
  Logger log;
  kube::FakeKubeClient api;
  FakeClock clock;
  kube::EventRecorder events;
  FakeWriterView view;
  Writer writer;
};

inline bool IsOk(const server::ReconcileResult& r) {
  return r.error.ok() && r.requeue_after.count() == 0;
}

// The image of a DaemonSet's first container.
inline std::string Image(const Value& ds) {
  const Value* c = Lookup(ds, {"spec", "template", "spec", "containers"});
  return c != nullptr && c->IsList() && !c->AsList().empty() ? StringAt(c->AsList()[0], {"image"})
                                                              : "";
}

}  // namespace kmodd::testing
