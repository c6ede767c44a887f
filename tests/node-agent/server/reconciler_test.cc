#include <catch2/catch.hpp>

#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "node-agent/server/reconciler.h"
#include "server_rig.h"
#include "tests/fakes/fake_clock.h"
#include "tests/eventually.h"

using kmodd::agent::AgentState;
using kmodd::agent::DesiredState;
using kmodd::api::Phase;
using kmodd::agent::Reconciler;
using kmodd::testing::Eventually;
using kmodd::testing::FakeFirmware;
using kmodd::testing::LockedKernel;
using kmodd::testing::PhaseIs;
using kmodd::testing::Spec;

namespace {

// An image store for `slow:` images that blocks until released; dir: images resolve at once.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::string root;
  void Open(std::string r) {
    {
      std::lock_guard<std::mutex> l(mu);
      open = true;
      root = std::move(r);
    }
    cv.notify_all();
  }
};

class SlowStore : public kmodd::reconcile::ImageStore {
 public:
  explicit SlowStore(Gate& g) : gate_(g) {}
  absl::StatusOr<std::string> RootFor(const kmodd::api::NodeModuleSpec& m) override {
    if (m.config.container_image.rfind("throw:", 0) == 0) {
      throw std::runtime_error("a bug the store did not catch");
    }
    if (m.config.container_image.rfind("slow:", 0) != 0) {
      return dirs_.RootFor(m);
    }
    std::unique_lock<std::mutex> l(gate_.mu);
    gate_.cv.wait(l, [&] { return gate_.open; });
    return gate_.root;
  }

 private:
  Gate& gate_;
  kmodd::reconcile::DirImageStore dirs_;
};

struct Rig {
  kmodd::testing::TempDir dir{"server"};
  kmodd::FakeClock clock;  // time moves only when a test says so
  LockedKernel kernel;
  FakeFirmware firmware;
  AgentState state{clock};
  kmodd::agent::Metrics metrics;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log{devnull};
  Gate gate;
  std::unique_ptr<Reconciler> rec;
  std::string img_a, img_b;

  Rig() {
    img_a = kmodd::testing::MakeDriverImage(dir.path + "/a", {"mod_a"});
    img_b = kmodd::testing::MakeDriverImage(dir.path + "/b", {"mod_b"});
    Restart();
  }
  ~Rig() {
    rec.reset();
    std::fclose(devnull);
  }
  void Restart() {
    rec.reset();
    kmodd::agent::ReconcilerOptions o;
    o.journal_path = dir.path + "/journal.json";
    o.retry = {std::chrono::milliseconds(20), std::chrono::milliseconds(100)};
    o.image_store = [this](const std::string&) { return std::make_unique<SlowStore>(gate); };
    o.seed = 1;
    rec = std::make_unique<Reconciler>(kernel, &firmware, state, metrics, log, clock, o);
    REQUIRE(rec->Start().ok());
  }
  void Desire(std::vector<kmodd::api::NodeModuleSpec> modules, const std::string& version = "v1") {
    rec->SetDesired(DesiredState{version, "controller", std::move(modules), {}});
  }
  bool Loaded(const std::string& m) {
    return kernel.With([&](kmodd::testing::FakeKernel& k) { return k.IsLoaded(m); });
  }
};

}  // namespace

TEST_CASE("the daemon's reconciler loads the desired Modules and reports them Loaded", "[server]") {
  Rig r;
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a"), Spec("ns", "b", "dir:" + r.img_b, "mod_b")});
  REQUIRE(Eventually([&] {
    return PhaseIs(r.state, "ns/a", Phase::kLoaded) && PhaseIs(r.state, "ns/b", Phase::kLoaded);
  }));
  CHECK(r.Loaded("mod_a"));
  CHECK(r.Loaded("mod_b"));
  const auto snap = r.state.Snapshot();
  CHECK(snap.desired_version == "v1");
  CHECK(kmodd::testing::FindStatus(snap, "ns/a")->kernel_modules == std::vector<std::string>{"mod_a"});
}

TEST_CASE("one failing Module does not keep the others from loading", "[server]") {
  Rig r;
  r.kernel.With([](kmodd::testing::FakeKernel& k) { k.fail_insert["mod_a"] = EPERM; return 0; });
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a"), Spec("ns", "b", "dir:" + r.img_b, "mod_b")});
  REQUIRE(Eventually([&] {
    return PhaseIs(r.state, "ns/a", Phase::kFailed) && PhaseIs(r.state, "ns/b", Phase::kLoaded);
  }));
  const auto snap = r.state.Snapshot();
  CHECK(kmodd::testing::FindStatus(snap, "ns/a")->error_class == kmodd::agent::ErrorClass::kTerminal);
}

TEST_CASE("a transient kernel failure is retried with backoff until it loads", "[server]") {
  Rig r;
  r.kernel.With([](kmodd::testing::FakeKernel& k) { k.fail_insert["mod_a"] = EBUSY; return 0; });
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a")});
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kFailed); }));
  r.kernel.With([](kmodd::testing::FakeKernel& k) { k.fail_insert.clear(); return 0; });
  REQUIRE(r.clock.AwaitWaiters(1));  // the worker waits for the retry
  r.clock.Advance(std::chrono::milliseconds(100));  // the backoff's cap
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
}

TEST_CASE("a slow pull does not delay another Module's load", "[server]") {
  Rig r;
  r.Desire({Spec("ns", "a", "slow:registry/a:1", "mod_a"), Spec("ns", "b", "dir:" + r.img_b, "mod_b")});
  REQUIRE(Eventually([&] {
    return PhaseIs(r.state, "ns/a", Phase::kPulling) && PhaseIs(r.state, "ns/b", Phase::kLoaded);
  }));
  r.gate.Open(r.img_a);
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  CHECK(r.Loaded("mod_a"));
}

TEST_CASE("an exception out of a pull fails that pull; the agent goes on", "[server]") {
  Rig r;
  r.Desire({Spec("ns", "a", "throw:registry/a:1", "mod_a"), Spec("ns", "b", "dir:" + r.img_b, "mod_b")});
  REQUIRE(Eventually([&] {
    return PhaseIs(r.state, "ns/a", Phase::kFailed) && PhaseIs(r.state, "ns/b", Phase::kLoaded);
  }));
  const auto snap = r.state.Snapshot();
  CHECK_THAT(kmodd::testing::FindStatus(snap, "ns/a")->message,
             Catch::Contains("pull of throw:registry/a:1 failed unexpectedly: "
                             "a bug the store did not catch"));
  // The pull threads still serve: the next desired state loads.
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a")}, "v2");
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
}

TEST_CASE("after a restart without any desired state, nothing kmodd loaded is unloaded", "[server]") {
  Rig r;
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a")});
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  r.rec.reset();
  AgentState fresh(r.clock);
  kmodd::agent::ReconcilerOptions o;
  o.journal_path = r.dir.path + "/journal.json";
  Reconciler again(r.kernel, &r.firmware, fresh, r.metrics, r.log, r.clock, o);
  REQUIRE(again.Start().ok());
  REQUIRE(Eventually([&] { return again.passes() >= 1; }));
  CHECK(PhaseIs(fresh, "ns/a", Phase::kLoaded));
  CHECK(r.Loaded("mod_a"));
}

TEST_CASE("a desired state without a Module unloads it, only what kmodd loaded", "[server]") {
  Rig r;
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a")});
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  r.Desire({}, "v2");
  REQUIRE(Eventually([&] { return !r.Loaded("mod_a") && r.state.Snapshot().modules.empty(); }));
}

TEST_CASE("a debugging override lasts until the next desired state", "[server]") {
  Rig r;
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a")});
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  const std::string msg = r.rec->OverrideUnload("ns/a");
  CHECK(msg.find("next desired state") != std::string::npos);
  REQUIRE(Eventually([&] { return !r.Loaded("mod_a"); }));
  CHECK(r.state.Snapshot().overrides == std::vector<std::string>{"ns/a (unload)"});
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a")}, "v2");
  REQUIRE(Eventually([&] { return r.Loaded("mod_a"); }));
  CHECK(r.state.Snapshot().overrides.empty());
}

TEST_CASE("plan shows what a pass would do without doing it", "[server]") {
  Rig r;
  r.Desire({Spec("ns", "a", "dir:" + r.img_a, "mod_a")});
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  REQUIRE(Eventually([&] { return r.rec->PreviewPass().ok() && r.rec->PreviewPass()->actions.empty(); }));
  r.kernel.With([](kmodd::testing::FakeKernel& k) { return k.loaded.erase("mod_a"); });
  auto plan = r.rec->PreviewPass();  // the reconciler was not kicked: it has not seen the drift
  REQUIRE(plan.ok());
  REQUIRE(plan->actions.size() == 1);
  CHECK(plan->actions[0].key == "ns/a");
  r.rec->Kick();
  REQUIRE(Eventually([&] { return r.Loaded("mod_a"); }));
}

TEST_CASE("the daemon loads an in-tree module again once the Module that replaced it goes",
          "[server]") {
  Rig r;
  r.kernel.With([](kmodd::testing::FakeKernel& k) {
    k.host.insert("intree_a");
    return k.InsertHost("intree_a", "").ok();
  });
  auto replacing = Spec("ns", "a", "dir:" + r.img_a, "mod_a");
  replacing.config.in_tree_modules_to_remove = {"intree_a"};
  r.Desire({replacing});
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  CHECK_FALSE(r.Loaded("intree_a"));
  const bool fails = GENERATE(false, true);
  if (fails) {  // e.g. lockdown since: reported, and the Module's unload still finishes
    r.kernel.With([](kmodd::testing::FakeKernel& k) { return k.fail_insert["intree_a"] = EPERM; });
  }
  auto events = r.state.Subscribe(false);
  r.Desire({}, "v2");
  REQUIRE(Eventually([&] { return !r.Loaded("mod_a") && r.state.Snapshot().modules.empty(); }));
  const std::string kind = fails ? "InTreeReloadFailed" : "InTreeReloaded";
  std::string message;
  REQUIRE(Eventually([&] {
    for (const auto& e : events->Next(r.clock.MonotonicNow())) {
      if (e.kind == kind) {
        message = e.message;
      }
    }
    return !message.empty();
  }));
  CHECK(message.find("intree_a") != std::string::npos);
  CHECK(r.Loaded("intree_a") == !fails);
}
