// The image GC (node-agent/server/image_gc.h): its period on a FakeClock, and what it
// removes on the real code: the real reconciler, the real image cache, driver images made
// with umoci as OCI layouts (tools/registry/push-image --no-push; no registry needed).

#include <catch2/catch.hpp>

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "node-agent/image/cache.h"
#include "node-agent/reconcile/oci_image_store.h"
#include "node-agent/server/image_gc.h"
#include "registry_rig.h"
#include "server_rig.h"
#include "tests/fakes/fake_clock.h"
#include "tests/eventually.h"

namespace fs = std::filesystem;
using kmodd::agent::ImageGc;
using kmodd::api::Phase;
using kmodd::testing::Eventually;
using kmodd::testing::PhaseIs;
using std::chrono::minutes;

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("the image GC runs once per period on the clock; a skipped round waits for the next",
          "[server][image_gc]") {
  kmodd::FakeClock clock;
  kmodd::testing::TempDir dir{"server"};
  const std::string log_path = dir.path + "/agent.log";
  std::FILE* log_file = std::fopen(log_path.c_str(), "w");
  std::vector<kmodd::Clock::Monotonic> ran;  // when each round pruned
  {
    kmodd::Logger log{log_file};
    std::mutex mu;
    ImageGc gc(clock, minutes(10),
               [&]() -> absl::StatusOr<std::vector<std::string>> {
                 std::lock_guard<std::mutex> l(mu);
                 ran.push_back(clock.MonotonicNow());
                 if (ran.size() == 1) {
                   return absl::UnavailableError("a pull is in flight; prune again when it is done");
                 }
                 return std::vector<std::string>{"/cache/trees/old"};
               },
               log);
    const auto t0 = clock.MonotonicNow();
    gc.Start();
    REQUIRE(clock.AwaitWaiters(1));
    CHECK(gc.rounds() == 0);  // not at start
    clock.Advance(minutes(10) - std::chrono::seconds(1));
    clock.Advance(std::chrono::seconds(1));
    REQUIRE(Eventually([&] { return gc.rounds() == 1; }));
    REQUIRE(clock.AwaitWaiters(1));
    clock.Advance(minutes(10));
    REQUIRE(Eventually([&] { return gc.rounds() == 2; }));
    REQUIRE(clock.AwaitWaiters(1));
    gc.Stop();
    CHECK(gc.rounds() == 2);
    std::lock_guard<std::mutex> l(mu);
    CHECK(ran == std::vector<kmodd::Clock::Monotonic>{t0 + minutes(10), t0 + minutes(20)});
  }
  std::fclose(log_file);
  const std::string logged = ReadAll(log_path);
  CHECK_THAT(logged, Catch::Contains("\"msg\":\"image GC skipped\""));
  CHECK_THAT(logged, Catch::Contains("a pull is in flight"));
  CHECK_THAT(logged, Catch::Contains("\"msg\":\"image GC removed unused trees\""));
}

namespace {

// Blocks the pull of `slow:` images until released; everything else goes to the real store.
struct PullGate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool entered = false;
};

class GatedStore : public kmodd::reconcile::ImageStore {
 public:
  GatedStore(PullGate& gate, std::unique_ptr<kmodd::reconcile::ImageStore> real)
      : gate_(gate), real_(std::move(real)) {}
  absl::StatusOr<std::string> RootFor(const kmodd::api::NodeModuleSpec& m) override {
    auto spec = m;
    if (spec.config.container_image.rfind("slow:", 0) == 0) {
      std::unique_lock<std::mutex> l(gate_.mu);
      gate_.entered = true;
      gate_.cv.notify_all();
      gate_.cv.wait(l, [&] { return gate_.open; });
      spec.config.container_image = spec.config.container_image.substr(5);
    }
    return real_->RootFor(spec);
  }
  std::string DigestOf(const std::string& root) const override { return real_->DigestOf(root); }

 private:
  PullGate& gate_;
  std::unique_ptr<kmodd::reconcile::ImageStore> real_;
};

struct GcRig : kmodd::testing::AgentParts<> {
  kmodd::image::ImageCache cache{
      dir.path + "/cache",
      [](const kmodd::image::RegistryOptions&)
          -> absl::StatusOr<std::unique_ptr<kmodd::http::HttpClient>> {
        return absl::FailedPreconditionError("these tests pull OCI layouts only");
      }};
  PullGate gate;
  std::unique_ptr<kmodd::agent::Reconciler> rec;

  GcRig() {
    kmodd::agent::ReconcilerOptions o = Options();
    o.image_store = [this](const std::string& secret) {
      kmodd::reconcile::OciImageStore::Options io;
      io.pull_secret = secret;
      return std::make_unique<GatedStore>(
          gate, std::make_unique<kmodd::reconcile::OciImageStore>(cache, io));
    };
    rec = std::make_unique<kmodd::agent::Reconciler>(kernel, &firmware, state, metrics, log,
                                                      clock, o);
    REQUIRE(rec->Start().ok());
  }
  ~GcRig() {
    {
      std::lock_guard<std::mutex> l(gate.mu);
      gate.open = true;
    }
    gate.cv.notify_all();
    rec.reset();
  }
  // An OCI layout holding a driver tree with `module`, as oci-layout:PATH:TAG.
  std::string Image(const std::string& name, const std::string& module) {
    return kmodd::testing::MakeDriver(nullptr, dir.path, "kmodd/" + name + ":v1", module).image;
  }
  std::set<std::string> Trees() {
    auto entries = cache.List();
    REQUIRE(entries.ok());
    std::set<std::string> out;
    for (const auto& e : *entries) {
      out.insert(e.path);
    }
    return out;
  }
  // Pulls `image` into the cache as the agent would, without any Module using it.
  std::string PullUnused(const std::string& image, const std::string& module) {
    kmodd::reconcile::OciImageStore store(cache, {});
    auto root = store.RootFor(kmodd::testing::Spec("ns", "unused", image, module));
    REQUIRE(root.ok());
    return *root;
  }
};

}  // namespace

TEST_CASE("the image GC keeps the trees in use and removes the others, never during a pull",
          "[server][image_gc]") {
  GcRig r;
  const std::string a = r.Image("a", "mod_a");
  const std::string b = r.Image("b", "mod_b");
  r.rec->SetDesired({"v1", "controller", {kmodd::testing::Spec("ns", "a", a, "mod_a")}, {}});
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); },
                     std::chrono::seconds(30)));
  const std::set<std::string> in_use = r.Trees();  // ns/a's
  REQUIRE(in_use.size() == 1);
  // A tree nothing uses (pulled, then its Module went): removed; ns/a's stays.
  std::string unused = r.PullUnused(b, "mod_b");
  REQUIRE(r.Trees().size() == 2);
  auto removed = kmodd::agent::PruneUnusedImages(*r.rec, r.cache, r.state);
  REQUIRE(removed.ok());
  CHECK(*removed == std::vector<std::string>{unused});
  CHECK(r.Trees() == in_use);
  unused = r.PullUnused(b, "mod_b");

  // A pull in flight (Module ns/slow): the round is refused and nothing is removed.
  r.rec->SetDesired({"v2",
                     "controller",
                     {kmodd::testing::Spec("ns", "a", a, "mod_a"),
                      kmodd::testing::Spec("ns", "slow", "slow:" + b, "mod_b")},
                     {}});
  {
    std::unique_lock<std::mutex> l(r.gate.mu);
    REQUIRE(r.gate.cv.wait_for(l, std::chrono::seconds(30), [&] { return r.gate.entered; }));
  }
  const auto refused = kmodd::agent::PruneUnusedImages(*r.rec, r.cache, r.state);
  CHECK(refused.status().code() == absl::StatusCode::kUnavailable);
  CHECK(r.Trees().size() == 2);

  // The pull done (it resolved to the tree pulled before, now in use): nothing to remove.
  {
    std::lock_guard<std::mutex> l(r.gate.mu);
    r.gate.open = true;
  }
  r.gate.cv.notify_all();
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/slow", Phase::kLoaded); },
                     std::chrono::seconds(30)));
  auto none = kmodd::agent::PruneUnusedImages(*r.rec, r.cache, r.state);
  REQUIRE(none.ok());
  CHECK(none->empty());

  // ns/slow no longer desired and unloaded: its tree is no longer in use and goes; ns/a's stays.
  r.rec->SetDesired({"v3", "controller", {kmodd::testing::Spec("ns", "a", a, "mod_a")}, {}});
  REQUIRE(Eventually([&] { return r.state.Snapshot().modules.size() == 1; }));
  auto pruned = kmodd::agent::PruneUnusedImages(*r.rec, r.cache, r.state);
  REQUIRE(pruned.ok());
  CHECK(*pruned == std::vector<std::string>{unused});
  CHECK(r.Trees() == in_use);
  CHECK(fs::exists(*in_use.begin() + "/opt/lib/modules/6.1.0-test/mod_a.ko"));
}
