#pragma once

// Shared by the Hub's unit tests: a stream that keeps what it was sent, and a Module for
// the worker nodes of namespace demo.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/decode.h"
#include "controller/server/hub.h"
#include "tests/fakes/fake_clock.h"

namespace kmodd::testing {

struct FakeStream : server::AgentStream {
  std::vector<std::shared_ptr<const v1::NodeDesired>> pushed;
  std::optional<absl::Status> closed;
  void Push(std::shared_ptr<const v1::NodeDesired> d) override { pushed.push_back(std::move(d)); }
  void Close(const absl::Status& why) override { closed = why; }
  const v1::NodeDesired& Last() const { return *pushed.back(); }
};

// Module demo/<name> for nodes labelled role=worker, running `image` on every kernel.
inline api::Module MakeModule(const std::string& name, const std::string& image) {
  auto m = api::DecodeModule(absl::StrCat(
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata: {name: ", name,
      ", namespace: demo}\nspec:\n  selector: {role: worker}\n  moduleLoader:\n    container:\n"
      "      modprobe: {moduleName: m}\n      kernelMappings:\n"
      "        - {regexp: '^.+$', containerImage: '",
      image, "'}\n"));
  REQUIRE(m.ok());
  return *m;
}

// A hub on a fake clock (at unix 1,000,000 ms) that logs to /dev/null, forgetting nodes
// away for 10 minutes.
struct HubHarness {
  explicit HubHarness(server::HubOptions options = {"run", std::chrono::minutes(10)})
      : devnull(std::fopen("/dev/null", "w")), log(devnull), hub(std::move(options), clock, log) {}
  ~HubHarness() { std::fclose(devnull); }
  HubHarness(const HubHarness&) = delete;
  HubHarness& operator=(const HubHarness&) = delete;
  std::FILE* devnull;
  Logger log;
  FakeClock clock{absl::FromUnixMillis(1'000'000)};
  server::Hub hub;
};

}  // namespace kmodd::testing
