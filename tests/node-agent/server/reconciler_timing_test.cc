// The reconciler's own timing on a FakeClock, without sleeping: the wedged check behind
// /healthz, the periodic resync that repairs drift no event reported, and a retry whose
// backoff ends while a pass is still running.

#include <catch2/catch.hpp>

#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "common/http/metrics_routes.h"
#include "node-agent/server/reconciler.h"
#include "server_rig.h"
#include "tests/fakes/fake_clock.h"
#include "tests/eventually.h"

using kmodd::api::Phase;
using kmodd::testing::Eventually;
using kmodd::testing::PhaseIs;
using std::chrono::minutes;

namespace {

// A kernel whose inserts (of files named `only`, when set) wait until the test lets them
// through: a pass that hangs.
class StuckKernel : public kmodd::testing::LockedKernel {
 public:
  std::string only;

  absl::Status InsertFile(const std::string& path, const std::string& params) override {
    if (only.empty() || path.find(only) != std::string::npos) {
      std::unique_lock<std::mutex> l(mu_);
      stuck_ = true;
      cv_.notify_all();
      cv_.wait(l, [this] { return released_; });
    }
    return LockedKernel::InsertFile(path, params);
  }
  bool AwaitStuck() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [this] { return stuck_; });
  }
  void Release() {
    {
      std::lock_guard<std::mutex> l(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stuck_ = false;
  bool released_ = false;
};

template <class Kernel>
struct TimingRig : kmodd::testing::AgentParts<kmodd::FakeClock, Kernel> {
  std::string image =
      "dir:" + kmodd::testing::MakeDriverImage(this->dir.path + "/img", {"mod_a"});
  std::unique_ptr<kmodd::agent::Reconciler> rec;

  TimingRig() {
    kmodd::agent::ReconcilerOptions o = this->Options();
    o.wedged_after = minutes(10);
    o.resync_every = minutes(5);
    o.image_store = [](const std::string&) {
      return std::make_unique<kmodd::reconcile::DirImageStore>();
    };
    rec = std::make_unique<kmodd::agent::Reconciler>(this->kernel, &this->firmware, this->state,
                                                      this->metrics, this->log, this->clock, o);
    REQUIRE(rec->Start().ok());
  }
  void Desire() {
    rec->SetDesired({"v1", "controller", {kmodd::testing::Spec("ns", "a", image, "mod_a")}, {}});
  }
};

}  // namespace

TEST_CASE("a pass that runs longer than wedged_after fails /healthz until it ends",
          "[server][timing]") {
  TimingRig<StuckKernel> r;
  // As the daemon wires it (run_cmd.cc): healthy unless wedged.
  const kmodd::http::Router routes = kmodd::http::MetricsRoutes(
      {[] { return std::string(); }, [&] { return !r.rec->Wedged(); }});
  auto healthz = [&] { return routes.Route({"GET", "/healthz", "", ""}).status; };
  CHECK(healthz() == 200);
  r.Desire();
  REQUIRE(r.kernel.AwaitStuck());  // the pass hangs in the kernel
  CHECK(healthz() == 200);
  r.clock.Advance(minutes(10));
  CHECK(healthz() == 200);  // exactly wedged_after: not yet
  r.clock.Advance(std::chrono::milliseconds(1));
  CHECK(r.rec->Wedged());
  CHECK(healthz() == 503);
  r.kernel.Release();
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  REQUIRE(Eventually([&] { return !r.rec->Wedged(); }));
  CHECK(healthz() == 200);
  // Idle for long is not wedged: only a pass in progress counts.
  REQUIRE(r.clock.AwaitWaiters(1));
  r.clock.Advance(minutes(60));
  CHECK_FALSE(r.rec->Wedged());
}

TEST_CASE("the reconciler repairs drift no event reported at the next resync period",
          "[server][timing]") {
  TimingRig<kmodd::testing::LockedKernel> r;
  r.Desire();
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kLoaded); }));
  REQUIRE(r.clock.AwaitWaiters(1));
  // Removed behind kmodd's back, and no uevent said so.
  r.kernel.With([](kmodd::testing::FakeKernel& k) { return k.loaded.erase("mod_a"); });
  const uint64_t passes = r.rec->passes();
  r.clock.Advance(minutes(5) - std::chrono::milliseconds(1));
  CHECK(r.rec->passes() == passes);
  r.clock.Advance(std::chrono::milliseconds(1));
  REQUIRE(Eventually([&] { return r.Loaded("mod_a") && r.rec->passes() > passes; }));
}

TEST_CASE("a retry whose backoff ended during a long pass runs right after it, not at the resync",
          "[server][timing]") {
  TimingRig<StuckKernel> r;
  r.kernel.only = "mod_b.ko";
  r.kernel.With([](kmodd::testing::FakeKernel& k) { return k.fail_insert["mod_a"] = EBUSY; });
  const std::string image_b = "dir:" + kmodd::testing::MakeDriverImage(r.dir.path + "/img_b", {"mod_b"});
  // Loads run by key: ns/a fails (retried after at most 1 s), then ns/b hangs in the kernel.
  r.rec->SetDesired({"v1",
                     "controller",
                     {kmodd::testing::Spec("ns", "a", r.image, "mod_a"),
                      kmodd::testing::Spec("ns", "b", image_b, "mod_b")},
                     {}});
  REQUIRE(r.kernel.AwaitStuck());
  REQUIRE(Eventually([&] { return PhaseIs(r.state, "ns/a", Phase::kFailed); }));
  r.kernel.With([](kmodd::testing::FakeKernel& k) { return k.fail_insert.erase("mod_a"); });
  r.clock.Advance(std::chrono::seconds(1));  // ns/a's retry is due while the pass still runs
  r.kernel.Release();
  // No more time passes: the retry must not wait for the resync period.
  REQUIRE(Eventually([&] { return r.Loaded("mod_a"); }));
  CHECK(PhaseIs(r.state, "ns/b", Phase::kLoaded));
}
