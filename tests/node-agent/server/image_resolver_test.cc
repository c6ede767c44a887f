// The image resolver (node-agent/server/image_resolver.h): the pull pool's logic with a
// fake ImageStore, and a pull from a real registry (tools/registry/start https).

#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <stdexcept>

#include "node-agent/image/cache.h"
#include "node-agent/reconcile/oci_image_store.h"
#include "node-agent/server/image_resolver.h"
#include "registry_rig.h"
#include "server_rig.h"
#include "tests/eventually.h"

using kmodd::agent::ImageResolver;
using kmodd::testing::Eventually;

namespace {

// An image store by image name: "slow:*" blocks until Release, "fail:*" is Unavailable,
// "throw:*" throws, anything else resolves to /roots/<image> with digest sha256:<image>.
// Counts the pulls of each image and remembers each one's secret.
class FakeImages {
 public:
  std::unique_ptr<kmodd::reconcile::ImageStore> Store(const std::string& secret) {
    return std::make_unique<Store_>(*this, secret);
  }
  void Release() {
    {
      std::lock_guard<std::mutex> l(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  int Pulls(const std::string& image) {
    std::lock_guard<std::mutex> l(mu_);
    return pulls_[image];
  }
  std::string SecretOf(const std::string& image) {
    std::lock_guard<std::mutex> l(mu_);
    return secrets_[image];
  }
  int InSlowPull() {
    std::lock_guard<std::mutex> l(mu_);
    return waiting_;
  }

 private:
  class Store_ : public kmodd::reconcile::ImageStore {
   public:
    Store_(FakeImages& images, std::string secret) : images_(images), secret_(std::move(secret)) {}
    absl::StatusOr<std::string> RootFor(const kmodd::api::NodeModuleSpec& m) override {
      const std::string& image = m.config.container_image;
      std::unique_lock<std::mutex> l(images_.mu_);
      ++images_.pulls_[image];
      images_.secrets_[image] = secret_;
      if (image.rfind("slow:", 0) == 0) {
        ++images_.waiting_;
        images_.cv_.wait(l, [&] { return images_.released_; });
        --images_.waiting_;
      }
      if (image.rfind("fail:", 0) == 0) {
        return absl::UnavailableError("registry unreachable for " + image);
      }
      if (image.rfind("throw:", 0) == 0) {
        throw std::runtime_error("a bug the store did not catch");
      }
      return "/roots/" + image;
    }
    std::string DigestOf(const std::string& root) const override {
      return "sha256:" + root.substr(std::string("/roots/").size());
    }

   private:
    FakeImages& images_;
    std::string secret_;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  int waiting_ = 0;
  std::map<std::string, int> pulls_;
  std::map<std::string, std::string> secrets_;
};

struct Rig {
  FakeImages images;
  std::FILE* devnull = std::fopen("/dev/null", "w");
  kmodd::Logger log{devnull};
  std::mutex mu;
  std::vector<std::string> events;  // "failed key", "done key recovered background"
  std::unique_ptr<ImageResolver> resolver;

  explicit Rig(int threads = 2) {
    ImageResolver::Hooks hooks;
    hooks.failed = [this](const std::string& key, const absl::Status&) {
      // Before the failure is visible: a pass asking now still sees it as in flight or
      // as it was, never the failure without its retry gate.
      const bool visible = resolver->Lookup(spec_of.at(key)).has_value();
      std::lock_guard<std::mutex> l(mu);
      events.push_back("failed " + key + (visible ? " (already visible)" : ""));
    };
    hooks.done = [this](const std::string& key, bool recovered, bool background) {
      std::lock_guard<std::mutex> l(mu);
      events.push_back("done " + key + (recovered ? " recovered" : "") +
                       (background ? " background" : ""));
    };
    resolver = std::make_unique<ImageResolver>(
        [this](const std::string& secret) { return images.Store(secret); }, threads, log, hooks);
    resolver->Start();
  }
  ~Rig() {
    images.Release();
    resolver.reset();
    std::fclose(devnull);
  }
  kmodd::api::NodeModuleSpec Spec(const std::string& key, const std::string& image) {
    auto s = kmodd::testing::Spec(key.substr(0, key.find('/')), key.substr(key.find('/') + 1),
                                  image, "m");
    spec_of[key] = s;
    return s;
  }
  std::vector<std::string> Events() {
    std::lock_guard<std::mutex> l(mu);
    return events;
  }
  // Resolve until the answer is no longer "in flight".
  absl::StatusOr<std::string> Await(const kmodd::api::NodeModuleSpec& s,
                                    const std::string& secret = "", bool retry_due = false) {
    std::optional<absl::StatusOr<std::string>> r;
    REQUIRE(Eventually([&] { return (r = resolver->Resolve(s, secret, retry_due)).has_value(); }));
    return *r;
  }
  std::map<std::string, kmodd::api::NodeModuleSpec> spec_of;
};

}  // namespace

TEST_CASE("a slow pull holds neither the caller nor another Module's, and runs once",
          "[server][images]") {
  Rig r;
  const auto slow = r.Spec("ns/slow", "slow:r/a:1");
  const auto fast = r.Spec("ns/fast", "r/b:1");
  CHECK_FALSE(r.resolver->Resolve(slow, "", false));  // started, in flight
  REQUIRE(Eventually([&] { return r.images.InSlowPull() == 1; }));
  // Asked again while it runs: still in flight, not started twice.
  CHECK_FALSE(r.resolver->Resolve(slow, "", true));
  CHECK(r.Await(fast).value() == "/roots/r/b:1");
  CHECK(r.images.Pulls("slow:r/a:1") == 1);
  // The pool is busy with one pull only: the other thread served the fast one.
  CHECK(r.resolver->WhileIdle([](const auto&) { return std::vector<std::string>{}; })
            .status()
            .code() == absl::StatusCode::kUnavailable);
  r.images.Release();
  CHECK(r.Await(slow).value() == "/roots/slow:r/a:1");
  CHECK(r.images.Pulls("slow:r/a:1") == 1);
  CHECK(r.Events() == std::vector<std::string>{"done ns/fast background", "done ns/slow background"});
}

TEST_CASE("a resolution is kept for its spec and secret; a new one resolves again",
          "[server][images]") {
  Rig r;
  const auto v1 = r.Spec("ns/a", "r/a:1");
  CHECK(r.Await(v1, "secret-1").value() == "/roots/r/a:1");
  CHECK(r.Await(v1, "secret-1", true).value() == "/roots/r/a:1");
  CHECK(r.images.Pulls("r/a:1") == 1);  // a root is not pulled again, due or not
  CHECK(r.resolver->Lookup(v1)->digest == "sha256:r/a:1");
  // A new secret (the Secret was fixed): pulled again, with it.
  CHECK_FALSE(r.resolver->Resolve(v1, "secret-2", false));
  CHECK(r.Await(v1, "secret-2").value() == "/roots/r/a:1");
  CHECK(r.images.Pulls("r/a:1") == 2);
  CHECK(r.images.SecretOf("r/a:1") == "secret-2");
  // A new spec: its own resolution; the old spec's is gone with it.
  const auto v2 = r.Spec("ns/a", "r/a:2");
  CHECK(r.Await(v2).value() == "/roots/r/a:2");
  CHECK_FALSE(r.resolver->Lookup(v1));
  CHECK(r.resolver->Roots() == std::set<std::string>{"/roots/r/a:2"});
}

TEST_CASE("a failed resolution is told first, kept until its retry is due, then tried again",
          "[server][images]") {
  Rig r;
  const auto bad = r.Spec("ns/a", "fail:r/a:1");
  const auto failed = r.Await(bad);
  CHECK(failed.status().code() == absl::StatusCode::kUnavailable);
  CHECK(r.Events() == std::vector<std::string>{"failed ns/a", "done ns/a background"});
  // Not due: the failure as it is, no pull.
  CHECK(r.resolver->Resolve(bad, "", false)->status() == failed.status());
  CHECK(r.images.Pulls("fail:r/a:1") == 1);
  CHECK(r.resolver->Lookup(bad)->error == failed.status());
  // Due: tried again.
  CHECK_FALSE(r.resolver->Resolve(bad, "", true));
  REQUIRE(Eventually([&] { return r.images.Pulls("fail:r/a:1") == 2; }));
}

TEST_CASE("a root replacing a failure is reported as recovered", "[server][images]") {
  Rig r;
  (void)r.Await(r.Spec("ns/a", "fail:r/a:1"));
  CHECK(r.Await(r.Spec("ns/a", "r/a:1")).ok());
  const auto events = r.Events();
  REQUIRE(events.size() == 3);
  CHECK(events[2] == "done ns/a recovered background");
}

TEST_CASE("a dir: image resolves at once on the caller's thread", "[server][images]") {
  Rig r;
  const auto local = r.Spec("ns/a", "dir:/node/tree");
  const auto root = r.resolver->Resolve(local, "", false);
  REQUIRE(root.has_value());
  CHECK(root->value() == "/roots/dir:/node/tree");
  CHECK(r.Events() == std::vector<std::string>{"done ns/a"});  // not background: no new pass
}

TEST_CASE("an exception out of the image store fails that pull; the pool goes on",
          "[server][images]") {
  Rig r(1);
  const auto thrower = r.Spec("ns/a", "throw:r/a:1");
  const auto s = r.Await(thrower);
  CHECK(s.status().code() == absl::StatusCode::kInternal);
  CHECK_THAT(std::string(s.status().message()),
             Catch::Equals("pull of throw:r/a:1 failed unexpectedly: a bug the store did not catch"));
  CHECK(r.Await(r.Spec("ns/b", "r/b:1")).value() == "/roots/r/b:1");
}

TEST_CASE("pruning runs with the resolved trees only while no pull is in flight",
          "[server][images]") {
  Rig r;
  CHECK(r.Await(r.Spec("ns/a", "r/a:1")).ok());
  (void)r.Await(r.Spec("ns/b", "fail:r/b:1"));
  std::set<std::string> seen;
  auto f = [&](const std::set<std::string>& roots) -> absl::StatusOr<std::vector<std::string>> {
    seen = roots;
    return std::vector<std::string>{"/roots/old"};
  };
  auto pruned = r.resolver->WhileIdle(f);
  REQUIRE(pruned.ok());
  CHECK(*pruned == std::vector<std::string>{"/roots/old"});
  CHECK(seen == std::set<std::string>{"/roots/r/a:1"});  // failures have no tree
  CHECK_FALSE(r.resolver->Resolve(r.Spec("ns/c", "slow:r/c:1"), "", false));
  seen.clear();
  CHECK(r.resolver->WhileIdle(f).status().code() == absl::StatusCode::kUnavailable);
  CHECK(seen.empty());  // not run
}

TEST_CASE("without an image store every resolution fails clearly", "[server][images]") {
  std::FILE* devnull = std::fopen("/dev/null", "w");
  {
    kmodd::Logger log{devnull};
    ImageResolver resolver({}, 1, log, {});
    resolver.Start();
    const auto r = resolver.Resolve(kmodd::testing::Spec("ns", "a", "r/a:1", "m"), "", true);
    REQUIRE(r.has_value());
    CHECK(r->status().code() == absl::StatusCode::kFailedPrecondition);
    CHECK(r->status().message() == "no image store is configured");
  }
  std::fclose(devnull);
}

TEST_CASE("the image resolver pulls from a real registry once, with the image's digest",
          "[registry]") {
  kmodd::testing::TempDir dir{"server"};
  kmodd::testing::Registry registry("https");
  const kmodd::testing::DriverImage pushed =
      kmodd::testing::MakeDriver(&registry, dir.path, "kmodd/driver:v1", "mod_a");
  const std::string& image = pushed.image;
  const std::string& digest = pushed.digest;
  kmodd::image::ImageCache cache(dir.path + "/cache", kmodd::agent::BeastFactory());
  std::atomic<int> stores{0};
  const std::string ca = registry.Env("KMODD_REGISTRY_CA");
  std::FILE* devnull = std::fopen("/dev/null", "w");
  {
    kmodd::Logger log{devnull};
    std::atomic<int> done{0};
    ImageResolver resolver(
        [&](const std::string& secret) {
          ++stores;
          kmodd::reconcile::OciImageStore::Options o;
          o.ca_file = ca;
          o.pull_secret = secret;
          return std::make_unique<kmodd::reconcile::OciImageStore>(cache, o);
        },
        2, log, ImageResolver::Hooks{nullptr, [&](const std::string&, bool, bool) { ++done; }});
    resolver.Start();
    const auto spec = kmodd::testing::Spec("ns", "a", image, "mod_a");
    CHECK_FALSE(resolver.Resolve(spec, "", false));
    REQUIRE(Eventually([&] { return done.load() == 1; }, std::chrono::seconds(30)));
    const auto root = resolver.Resolve(spec, "", true);
    REQUIRE(root.has_value());
    INFO(root->status());
    REQUIRE(root->ok());
    CHECK(std::filesystem::exists(**root + "/opt/lib/modules/6.1.0-test/mod_a.ko"));
    CHECK(resolver.Lookup(spec)->digest == digest);
    CHECK(resolver.Roots() == std::set<std::string>{**root});
    CHECK(stores.load() == 1);
  }
  std::fclose(devnull);
}

TEST_CASE("the resolutions of Modules no longer desired are forgotten, their trees not in use",
          "[server][images]") {
  Rig r;
  const auto a = r.Spec("ns/a", "r/a:1");
  const auto b = r.Spec("ns/b", "r/b:1");
  CHECK(r.Await(a).ok());
  CHECK(r.Await(b).ok());
  CHECK(r.resolver->Roots() == std::set<std::string>{"/roots/r/a:1", "/roots/r/b:1"});
  r.resolver->Retain({"ns/a"});
  CHECK(r.resolver->Roots() == std::set<std::string>{"/roots/r/a:1"});
  CHECK_FALSE(r.resolver->Lookup(b));
  CHECK(r.resolver->Lookup(a));
  // Desired again: resolved again.
  CHECK_FALSE(r.resolver->Resolve(b, "", false));
  CHECK(r.Await(b).ok());
  CHECK(r.images.Pulls("r/b:1") == 2);
}
