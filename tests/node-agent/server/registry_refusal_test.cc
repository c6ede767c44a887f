// The daemon's reconciler against a real registry (Debian's docker-registry with htpasswd,
// tools/registry/start basic): a pull secret the registry refuses is an auth problem that is
// retried with backoff (on a FakeClock: not before its delay, again after it), not a
// terminal kernel error, and once the Secret is fixed the Module loads. Without the
// registry this fails: it never passes by skipping.
#include <catch2/catch.hpp>

#include <atomic>

#include "absl/strings/escaping.h"
#include "node-agent/image/cache.h"
#include "node-agent/reconcile/oci_image_store.h"
#include "node-agent/server/reconciler.h"
#include "registry_rig.h"
#include "server_rig.h"
#include "tests/fakes/fake_clock.h"
#include "tests/eventually.h"

namespace {

using kmodd::agent::ErrorClass;
using kmodd::api::Phase;
using kmodd::testing::Eventually;
using kmodd::testing::FindStatus;

std::string Secret(const std::string& registry, const std::string& user, const std::string& pass) {
  return "{\"auths\":{\"" + registry + "\":{\"auth\":\"" + absl::Base64Escape(user + ":" + pass) +
         "\"}}}";
}

}  // namespace

TEST_CASE("a pull secret the real registry refuses is retried as an auth problem until fixed",
          "[registry]") {
  kmodd::testing::TempDir dir{"server"};
  kmodd::testing::Registry registry("basic");
  const std::string image =
      kmodd::testing::MakeDriver(&registry, dir.path, "kmodd/driver:v1", "mod_a").image;

  kmodd::FakeClock clock;
  kmodd::testing::LockedKernel kernel;
  kmodd::testing::FakeFirmware firmware;
  kmodd::agent::AgentState state(clock);
  kmodd::agent::Metrics metrics;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log{devnull};
  kmodd::image::ImageCache cache(dir.path + "/cache", kmodd::agent::BeastFactory());
  std::atomic<int> pulls{0};
  kmodd::agent::ReconcilerOptions o;
  o.journal_path = dir.path + "/journal.json";
  o.retry = {std::chrono::seconds(1), std::chrono::seconds(8)};
  o.seed = 1;
  const std::string ca = registry.Env("KMODD_REGISTRY_CA");
  o.image_store = [&](const std::string& secret) {
    ++pulls;
    kmodd::reconcile::OciImageStore::Options io;
    io.ca_file = ca;
    io.pull_secret = secret;
    return std::make_unique<kmodd::reconcile::OciImageStore>(cache, io);
  };
  {
    kmodd::agent::Reconciler rec(kernel, &firmware, state, metrics, log, clock, o);
    REQUIRE(rec.Start().ok());
    auto spec = kmodd::testing::Spec("ns", "a", image, "mod_a");
    spec.image_repo_secret = kmodd::api::LocalObjectReference{"pull"};
    const std::string reg = registry.Env("KMODD_REGISTRY");
    rec.SetDesired({"v1", "controller", {spec}, {{"ns/pull", Secret(reg, "kmodd", "wrong")}}});

    REQUIRE(Eventually([&] { return kmodd::testing::PhaseIs(state, "ns/a", Phase::kFailed); },
                       std::chrono::seconds(20)));
    const auto snap = state.Snapshot();
    const auto* m = FindStatus(snap, "ns/a");
    REQUIRE(m != nullptr);
    INFO(m->message);
    CHECK(m->error_class == ErrorClass::kRetry);
    CHECK_THAT(m->message, Catch::Contains("registry " + reg +
                                           " refused the credentials of the pull secret "
                                           "(user \"kmodd\") for kmodd/driver"));
    CHECK_THAT(m->message, Catch::Contains("check imageRepoSecret"));
    CHECK_THAT(m->message, Catch::Contains("HTTP 401"));
    CHECK_THAT(m->message, Catch::Contains("(will retry)"));
    // Retried with backoff, not at once and not held until a new desired state. The worker
    // waits on the clock for the retry, having pulled once.
    REQUIRE(clock.AwaitWaiters(1));
    CHECK(pulls.load() == 1);
    // Just before the shortest first delay (half of 1 s): a pass does not pull again.
    clock.Advance(std::chrono::milliseconds(499));
    const uint64_t before = rec.passes();
    rec.Kick();
    REQUIRE(Eventually([&] { return rec.passes() > before; }));
    CHECK(kmodd::testing::PhaseIs(state, "ns/a", Phase::kFailed));  // not Pulling
    REQUIRE(clock.AwaitWaiters(1));
    CHECK(pulls.load() == 1);
    // Past the longest first delay: pulled again and refused again (the pass the gate wakes
    // starts the pull; its refusal, once recorded, triggers the next), then waiting again.
    const uint64_t retried = rec.passes();
    clock.Advance(std::chrono::milliseconds(501));
    REQUIRE(Eventually([&] { return rec.passes() >= retried + 2; }, std::chrono::seconds(20)));
    CHECK(pulls.load() == 2);
    CHECK(kmodd::testing::PhaseIs(state, "ns/a", Phase::kFailed));
    REQUIRE(clock.AwaitWaiters(1));
    // The second delay doubles: [1 s, 2 s). Not before 1 s...
    clock.Advance(std::chrono::milliseconds(999));
    const uint64_t again = rec.passes();
    rec.Kick();
    REQUIRE(Eventually([&] { return rec.passes() > again; }));
    CHECK(kmodd::testing::PhaseIs(state, "ns/a", Phase::kFailed));
    REQUIRE(clock.AwaitWaiters(1));
    CHECK(pulls.load() == 2);
    // ...and by 2 s.
    clock.Advance(std::chrono::milliseconds(1001));
    REQUIRE(Eventually([&] { return pulls.load() == 3; }, std::chrono::seconds(20)));

    // The Secret fixed: the same desired state version, the next retry loads it.
    rec.SetDesired(
        {"v1", "controller", {spec}, {{"ns/pull", Secret(reg, "kmodd", registry.Env("KMODD_REGISTRY_PASSWORD"))}}});
    REQUIRE(Eventually([&] { return kmodd::testing::PhaseIs(state, "ns/a", Phase::kLoaded); },
                       std::chrono::seconds(20)));
    CHECK(kernel.With([](kmodd::testing::FakeKernel& k) { return k.IsLoaded("mod_a"); }));
  }
  std::fclose(devnull);
}
