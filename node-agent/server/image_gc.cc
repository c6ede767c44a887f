#include "node-agent/server/image_gc.h"

#include <exception>
#include <set>

namespace kmodd::agent {

namespace {

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || path.rfind(dir + "/", 0) == 0;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PruneUnusedImages(Reconciler& reconciler,
                                                          image::ImageCache& cache,
                                                          const AgentState& state) {
  std::set<std::string> desired_images;
  for (const ModuleStatus& m : state.Snapshot().modules) {
    if (!m.image.empty()) {
      desired_images.insert(m.image);
    }
  }
  // The keep set is computed while no pull can start, so none lands in between.
  return reconciler.PruneImages(
      [&](const std::set<std::string>& in_use) -> absl::StatusOr<std::vector<std::string>> {
        auto entries = cache.List();
        if (!entries.ok()) {
          return entries.status();
        }
        std::set<std::string> keep;
        for (const auto& e : *entries) {
          for (const auto& used : in_use) {
            if (Under(used, e.path)) {
              keep.insert(e.path);
            }
          }
          for (const auto& ref : e.references) {
            if (desired_images.count(ref) != 0) {
              keep.insert(e.path);
            }
          }
        }
        return cache.Prune(keep);
      });
}

ImageGc::ImageGc(const Clock& clock, std::chrono::nanoseconds period, Prune prune, Logger& log)
    : clock_(clock), period_(period), prune_(std::move(prune)), log_(log) {}

ImageGc::~ImageGc() { Stop(); }

void ImageGc::Start() {
  thread_ = std::thread([this] { Run(); });
}

void ImageGc::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

uint64_t ImageGc::rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rounds_;
}

// No exception leaves the GC's thread (std::terminate would take the node's agent down).
absl::StatusOr<std::vector<std::string>> ImageGc::Guarded() {
  try {
    return prune_();
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  } catch (...) {
    return absl::InternalError("an unknown exception");
  }
}

void ImageGc::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!clock_.WaitFor(lock, cv_, period_, [this] { return stop_; })) {
    lock.unlock();
    absl::StatusOr<std::vector<std::string>> pruned = Guarded();
    if (!pruned.ok()) {
      log_.Info("image GC skipped", {{"why", std::string(pruned.status().message())}});
    } else if (!pruned->empty()) {
      log_.Info("image GC removed unused trees", {{"trees", static_cast<int64_t>(pruned->size())}});
    }
    lock.lock();
    ++rounds_;
  }
}

}  // namespace kmodd::agent
