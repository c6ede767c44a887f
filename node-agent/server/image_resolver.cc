#include "node-agent/server/image_resolver.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"

namespace kmodd::agent {

ImageResolver::ImageResolver(StoreFactory stores, int threads, Logger& log, Hooks hooks)
    : stores_(std::move(stores)), threads_(std::max(1, threads)), log_(log),
      hooks_(std::move(hooks)) {}

ImageResolver::~ImageResolver() { Stop(); }

void ImageResolver::Start() {
  for (int i = 0; i < threads_; ++i) {
    pullers_.emplace_back([this] { PullWorker(); });
  }
}

void ImageResolver::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : pullers_) {
    if (t.joinable()) {
      t.join();
    }
  }
  pullers_.clear();
}

void ImageResolver::PullWorker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) {
      return;
    }
    auto job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

// A pull runs image, registry and secret code on untrusted input: whatever escapes it as an
// exception (a bug, bad_alloc) fails this pull with a message, never std::terminate.
absl::StatusOr<std::string> ImageResolver::GuardedRootFor(const api::NodeModuleSpec& spec,
                                                          const std::string& secret,
                                                          std::string& digest) {
  auto failed = [&spec](const std::string& what) {
    return absl::InternalError(absl::StrCat("pull of ", spec.config.container_image,
                                            " failed unexpectedly: ", what));
  };
  try {
    auto store = stores_(secret);
    absl::StatusOr<std::string> root = store->RootFor(spec);
    digest = root.ok() ? store->DigestOf(*root) : "";
    return root;
  } catch (const std::exception& e) {
    return failed(e.what());
  } catch (...) {
    return failed("an unknown exception");
  }
}

void ImageResolver::Run(const api::NodeModuleSpec& spec, const std::string& secret,
                        bool background) {
  const std::string key = spec.Key();
  std::string digest;
  absl::StatusOr<std::string> root = GuardedRootFor(spec, secret, digest);
  if (!root.ok()) {
    log_.Warn("image not available", {{"module", key},
                                      {"image", spec.config.container_image},
                                      {"error", std::string(root.status().message())}});
    if (hooks_.failed) {
      hooks_.failed(key, root.status());
    }
  }
  bool recovered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto p = pulling_.find(key); p != pulling_.end() && p->second == spec) {
      pulling_.erase(p);
    }
    auto before = resolved_.find(key);
    recovered = root.ok() && before != resolved_.end() && !before->second.root.ok();
    resolved_[key] = Entry{spec, secret, std::move(root), digest};
  }
  if (hooks_.done) {
    hooks_.done(key, recovered, background);
  }
}

std::optional<absl::StatusOr<std::string>> ImageResolver::Resolve(const api::NodeModuleSpec& spec,
                                                                  const std::string& secret,
                                                                  bool retry_due) {
  const std::string key = spec.Key();
  std::unique_lock<std::mutex> lock(mu_);
  if (auto it = resolved_.find(key);
      it != resolved_.end() && it->second.spec == spec && it->second.secret == secret &&
      (it->second.root.ok() || !retry_due)) {
    return it->second.root;
  }
  if (auto p = pulling_.find(key); p != pulling_.end() && p->second == spec) {
    return std::nullopt;
  }
  if (!stores_) {
    return absl::FailedPreconditionError("no image store is configured");
  }
  if (spec.config.container_image.rfind("dir:", 0) == 0) {
    lock.unlock();  // a directory on this node: nothing to wait for
    Run(spec, secret, false);
    lock.lock();
    return resolved_.at(key).root;
  }
  pulling_[key] = spec;
  queue_.push_back([this, spec, secret] { Run(spec, secret, true); });
  cv_.notify_one();
  return std::nullopt;
}

std::optional<ImageResolver::Resolution> ImageResolver::Lookup(
    const api::NodeModuleSpec& spec) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = resolved_.find(spec.Key());
  if (it == resolved_.end() || !(it->second.spec == spec)) {
    return std::nullopt;
  }
  const Entry& e = it->second;
  if (!e.root.ok()) {
    return Resolution{e.root.status(), "", ""};
  }
  return Resolution{absl::OkStatus(), *e.root, e.digest};
}

void ImageResolver::Retain(const std::set<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = resolved_.begin(); it != resolved_.end();) {
    it = keys.count(it->first) == 0 ? resolved_.erase(it) : std::next(it);
  }
}

std::set<std::string> ImageResolver::Roots() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> out;
  for (const auto& [key, e] : resolved_) {
    if (e.root.ok()) {
      out.insert(*e.root);
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ImageResolver::WhileIdle(
    const std::function<absl::StatusOr<std::vector<std::string>>(const std::set<std::string>&)>&
        f) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pulling_.empty()) {
    return absl::UnavailableError("a pull is in flight; prune again when it is done");
  }
  std::set<std::string> roots;
  for (const auto& [key, e] : resolved_) {
    if (e.root.ok()) {
      roots.insert(*e.root);
    }
  }
  return f(roots);
}

}  // namespace kmodd::agent
