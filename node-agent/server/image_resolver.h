#pragma once

// The image resolver: where each Module's driver tree comes from. Pulls run on a small pool
// of their own, so a slow pull never delays another Module or the reconciler's pass; each
// result is kept for exactly the spec and pull secret it was resolved with, so a pass asks
// again at no cost, and a new spec or secret resolves again. `dir:` images (a tree on this
// node) resolve at once on the caller's thread.
//
// What happens on a failure is the caller's decision: it says when a failed resolution may
// be tried again (Resolve's `retry_due`), and hears of each failure before a pass can see
// it (Hooks::failed), so that the retry is gated before it could start.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "api/node_modules_config.h"
#include "common/log.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::agent {

class ImageResolver {
 public:
  // The image store for one Module's pull, given its pull secret ("" = none: the store may
  // fall back to a configured one). Called on a pull thread.
  using StoreFactory =
      std::function<std::unique_ptr<reconcile::ImageStore>(const std::string& pull_secret)>;
  struct Hooks {
    // A resolution of Module `key` failed; called before Resolve can return that failure.
    std::function<void(const std::string& key, const absl::Status& error)> failed;
    // A resolution of `key` is done and visible to Resolve. `recovered`: it replaced a
    // failure with a root. `background`: it ran on the pool (a pass should look again).
    std::function<void(const std::string& key, bool recovered, bool background)> done;
  };
  // What an image resolved to, when it did.
  struct Resolution {
    absl::Status error;   // ok when `root` is the image's tree
    std::string root;
    std::string digest;   // of the image `root` came from, when it is an OCI image
  };

  // `stores` may be empty: every resolution then fails (FailedPrecondition).
  ImageResolver(StoreFactory stores, int threads, Logger& log, Hooks hooks);
  ~ImageResolver();
  ImageResolver(const ImageResolver&) = delete;
  ImageResolver& operator=(const ImageResolver&) = delete;

  void Start();
  // Waits for the pulls in progress; queued ones are dropped.
  void Stop();

  // The root for `spec` pulled with `secret`, its error, or nullopt while its pull runs
  // (started here when needed). A failed resolution is returned as it is until
  // `retry_due`, then tried again.
  std::optional<absl::StatusOr<std::string>> Resolve(const api::NodeModuleSpec& spec,
                                                     const std::string& secret, bool retry_due);
  // The last resolution of exactly `spec` (whatever its secret), if any.
  std::optional<Resolution> Lookup(const api::NodeModuleSpec& spec) const;
  // Forgets the resolutions of the Modules not in `keys` (no longer desired), so that
  // their trees are no longer in use for the image GC.
  void Retain(const std::set<std::string>& keys);

  // The trees resolved so far, the in-use trees of the image GC.
  std::set<std::string> Roots() const;
  // Runs `f` with Roots() while no pull is in flight; none starts until it returns.
  // Unavailable, without running `f`, while a pull is in flight.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> WhileIdle(
      const std::function<absl::StatusOr<std::vector<std::string>>(const std::set<std::string>&)>&
          f);

 private:
  struct Entry {  // a resolution, valid for exactly this spec and secret
    api::NodeModuleSpec spec;
    std::string secret;
    absl::StatusOr<std::string> root;
    std::string digest;
  };

  void PullWorker();
  // Resolves on the calling thread and publishes the result.
  void Run(const api::NodeModuleSpec& spec, const std::string& secret, bool background);
  // The image store's root for `spec` (and its digest), any exception turned into a Status.
  absl::StatusOr<std::string> GuardedRootFor(const api::NodeModuleSpec& spec,
                                             const std::string& secret, std::string& digest);

  const StoreFactory stores_;
  const int threads_;
  Logger& log_;
  const Hooks hooks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, Entry> resolved_;
  std::map<std::string, api::NodeModuleSpec> pulling_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> pullers_;
};

}  // namespace kmodd::agent
