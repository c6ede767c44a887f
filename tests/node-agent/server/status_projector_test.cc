// The status projector (node-agent/server/status_projector.h) as a specification: one
// status row per Module from what a pass knows.

#include <catch2/catch.hpp>

#include <cerrno>
#include <functional>

#include "node-agent/kernel/errors.h"
#include "node-agent/server/status_projector.h"

using kmodd::agent::ErrorClass;
using kmodd::agent::FailStatic;
using kmodd::agent::ImageFacts;
using kmodd::api::Phase;
using kmodd::agent::ModuleStatus;
using kmodd::agent::PreparedModule;
using kmodd::agent::ProjectStatus;
using kmodd::agent::RetryGates;
using kmodd::agent::StatusContext;

namespace {

const RetryGates::Time kT0 = RetryGates::Time{} + std::chrono::hours(1);

// A pass's world: the kernel, the journal and the retry state, filled per row.
struct World {
  kmodd::kernel::KernelState observed;
  kmodd::reconcile::Journal journal;
  RetryGates gates{{std::chrono::milliseconds(100), std::chrono::milliseconds(400)}};
  std::map<std::string, std::vector<std::string>> warnings;
  std::vector<PreparedModule> modules;
  StatusContext ctx;

  World() {
    observed.boot_id = journal.boot_id = "boot-1";
    ctx.desired_version = "v7";
    ctx.fail_static = FailStatic{true, {}};
  }
  // Desired Module `key` with one module `mod`, prepared from an image.
  PreparedModule& Desire(const std::string& key, const std::string& mod) {
    PreparedModule m;
    m.input.spec.namespace_ = key.substr(0, key.find('/'));
    m.input.spec.name = key.substr(key.find('/') + 1);
    m.input.spec.version = "1.2";
    m.input.spec.config.container_image = "r/" + mod + ":1";
    m.prepared.key = key;
    m.prepared.fingerprint = "f1";
    m.prepared.steps = {{mod, kmodd::kernel::LoadStep::Source::kTree, "/t/" + mod + ".ko", ""}};
    modules.push_back(std::move(m));
    return modules.back();
  }
  // `mod` in the kernel and in the journal for `key`, as kmodd loaded it.
  void Loaded(const std::string& key, const std::string& mod, const std::string& fingerprint = "f1") {
    kmodd::kernel::LoadedModule lm;
    lm.name = mod;
    lm.taint = "O";
    observed.modules.push_back(lm);
    auto& e = journal.modules[key];
    e.fingerprint = fingerprint;
    e.phase = Phase::kLoaded;
    e.loaded = {mod};
    e.source = "r/" + mod + ":0";
  }
  std::vector<ModuleStatus> Project() {
    ctx.journal = &journal;
    ctx.observed = &observed;
    ctx.retries = &gates;
    ctx.warnings = &warnings;
    return ProjectStatus(modules, ctx);
  }
};

const absl::Status kBusy = kmodd::kernel::KernelError(kmodd::kernel::KernelOp::kInsert, EBUSY, "m");

}  // namespace

TEST_CASE("each Module's status row says what the pass knows of it", "[server][status]") {
  struct Row {
    const char* what;
    std::function<void(World&)> given;
    Phase phase;
    std::string message;  // a prefix
    ErrorClass error_class;
  };
  const std::vector<Row> rows = {
      {"desired, nothing done yet", [](World& w) { w.Desire("ns/a", "mod_a"); }, Phase::kPending,
       "", ErrorClass::kNone},
      {"desired and in the kernel as desired",
       [](World& w) {
         w.Desire("ns/a", "mod_a");
         w.Loaded("ns/a", "mod_a");
       },
       Phase::kLoaded, "", ErrorClass::kNone},
      {"its image being pulled",
       [](World& w) {
         w.Desire("ns/a", "mod_a").pulling = true;
         w.modules.back().prepared.problem = absl::UnavailableError("pulling r/mod_a:1");
       },
       Phase::kPulling, "", ErrorClass::kNone},
      {"its pull refused by the registry, retried",
       [](World& w) {
         w.Desire("ns/a", "mod_a");
         const absl::Status refused = absl::UnauthenticatedError("registry refused the credentials");
         w.ctx.images["ns/a"] = ImageFacts{refused, ""};
         w.gates.Record("ns/a", refused, kT0, 0.0, std::nullopt, false);
       },
       Phase::kFailed, "registry refused the credentials (will retry)", ErrorClass::kRetry},
      {"a preparation problem (vermagic)",
       [](World& w) {
         w.Desire("ns/a", "mod_a").prepared.problem = absl::InvalidArgumentError("vermagic mismatch");
       },
       Phase::kFailed, "vermagic mismatch (not retried until the desired state changes)",
       ErrorClass::kTerminal},
      {"its load failed, retried",
       [](World& w) {
         w.Desire("ns/a", "mod_a");
         w.gates.Record("ns/a", kBusy, kT0, 0.0, std::nullopt, false);
       },
       Phase::kFailed, std::string(kBusy.message()) + " (will retry)", ErrorClass::kRetry},
      {"being loaded",
       [](World& w) {
         w.Desire("ns/a", "mod_a");
         w.ctx.acting = {{"ns/a", kmodd::agent::ModuleFacts::Acting::kLoad}};
       },
       Phase::kLoading, "", ErrorClass::kNone},
      {"drift: loaded before, a module gone since",
       [](World& w) {
         w.Desire("ns/a", "mod_a");
         w.Loaded("ns/a", "mod_a");
         w.observed.modules.clear();
       },
       Phase::kPending, "drift: reloading", ErrorClass::kNone},
      {"no longer desired",
       [](World& w) { w.Loaded("ns/a", "mod_a"); }, Phase::kUnloading, "no longer desired",
       ErrorClass::kNone},
      {"no longer desired, being unloaded",
       [](World& w) {
         w.Loaded("ns/a", "mod_a");
         w.ctx.acting = {{"ns/a", kmodd::agent::ModuleFacts::Acting::kUnload}};
       },
       Phase::kUnloading, "", ErrorClass::kNone},
      {"no desired state yet: kept as the journal has it",
       [](World& w) {
         w.Loaded("ns/a", "mod_a");
         w.ctx.fail_static = FailStatic{false, {}};
       },
       Phase::kLoaded, "no desired state yet: kept as the journal has it", ErrorClass::kNone},
      {"no desired state yet, failed in the journal",
       [](World& w) {
         w.Loaded("ns/a", "mod_a");
         w.journal.modules["ns/a"].phase = Phase::kFailed;
         w.journal.modules["ns/a"].message = "insert mod_a: EPERM";
         w.ctx.fail_static = FailStatic{false, {}};
       },
       Phase::kFailed, "insert mod_a: EPERM", ErrorClass::kNone},
      {"no desired state yet, but an unload override",
       [](World& w) {
         w.Loaded("ns/a", "mod_a");
         w.ctx.fail_static = FailStatic{false, {"ns/a"}};
       },
       Phase::kUnloading, "no longer desired", ErrorClass::kNone},
  };
  for (const auto& row : rows) {
    SECTION(row.what) {
      World w;
      row.given(w);
      const std::vector<ModuleStatus> out = w.Project();
      REQUIRE(out.size() == 1);
      CHECK(out[0].key == "ns/a");
      CHECK(out[0].namespace_ == "ns");
      CHECK(out[0].name == "a");
      CHECK(out[0].phase == row.phase);
      CHECK_THAT(out[0].message, Catch::StartsWith(row.message));
      CHECK(out[0].error_class == row.error_class);
      CHECK(out[0].desired_version == "v7");
    }
  }
}

TEST_CASE("a status row carries the image, its digest, the modules, firmware and warnings",
          "[server][status]") {
  World w;
  w.Desire("ns/a", "mod_a");
  w.Loaded("ns/a", "mod_a");
  w.journal.modules["ns/a"].firmware = {"fw/a.bin"};
  w.warnings["ns/a"] = {"staged firmware shadows the host's"};
  w.ctx.images["ns/a"] = ImageFacts{absl::OkStatus(), "sha256:abc"};
  w.Loaded("ns/gone", "mod_gone");
  const std::vector<ModuleStatus> out = w.Project();
  REQUIRE(out.size() == 2);
  // Desired Modules first, then the journal's others.
  CHECK(out[0].key == "ns/a");
  CHECK(out[0].image == "r/mod_a:1");  // the desired image, not the journal's
  CHECK(out[0].image_digest == "sha256:abc");
  CHECK(out[0].version == "1.2");
  CHECK(out[0].kernel_modules == std::vector<std::string>{"mod_a"});
  CHECK(out[0].firmware == std::vector<std::string>{"fw/a.bin"});
  CHECK(out[0].warnings == std::vector<std::string>{"staged firmware shadows the host's"});
  CHECK(out[1].key == "ns/gone");
  CHECK(out[1].image == "r/mod_gone:0");  // what the journal loaded it from
  CHECK(out[1].kernel_modules == std::vector<std::string>{"mod_gone"});
}
