#include "controller/source/dir_source.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/validate.h"
#include "common/file.h"

namespace kmodd::source {

namespace fs = std::filesystem;

namespace {

// IN_MODIFY marks a file as being written (open(O_TRUNC) sends it before any byte is
// written); IN_CLOSE_WRITE ends that.
constexpr uint32_t kWatchMask = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE |
                                IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

bool IsManifest(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.empty() || name[0] == '.') {
    return false;  // editors' and tools' temporary files
  }
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

}  // namespace

std::optional<std::vector<std::string>> ListManifests(const std::string& dir, std::error_code& ec) {
  std::vector<std::string> listed;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (entry.is_regular_file(type_ec) && IsManifest(entry.path())) {
      listed.push_back(entry.path().string());
    }
  }
  if (ec) {
    return std::nullopt;
  }
  std::sort(listed.begin(), listed.end());
  return listed;
}

namespace {

Logger::Fields DiagnosticFields(const api::Diagnostic& d) {
  Logger::Fields f{{"file", d.source}, {"line", d.line}};
  if (!d.object.empty()) {
    f.emplace_back("object", d.object);
  }
  if (!d.path.empty()) {
    f.emplace_back("field", d.path);
  }
  f.emplace_back("error", d.message);
  return f;
}

}  // namespace

DirSource::DirSource(std::string dir, const Clock& clock, Logger& log,
                     std::chrono::milliseconds debounce)
    : dir_(std::move(dir)), clock_(clock), log_(log), debounce_(debounce) {}

DirSource::~DirSource() { Stop(); }

absl::Status DirSource::Start(Callback on_update) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    return absl::NotFoundError(
        absl::StrCat("modules directory ", dir_, ": not a directory",
                     ec ? absl::StrCat(" (", ec.message(), ")") : std::string()));
  }
  inotify_ = Fd(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!inotify_.valid()) {
    return ErrnoStatus(errno, "inotify_init1", dir_);
  }
  if (inotify_add_watch(inotify_.get(), dir_.c_str(), kWatchMask) < 0) {
    return ErrnoStatus(errno, "inotify_add_watch", dir_);
  }
  wake_ = Fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_.valid()) {
    return ErrnoStatus(errno, "eventfd", dir_);
  }
  on_update_ = std::move(on_update);
  Rescan(/*initial=*/true, {});
  watcher_ = std::thread(&DirSource::Watch, this);
  reader_ = std::thread(&DirSource::Read, this);
  return absl::OkStatus();
}

void DirSource::Stop() {
  if (!watcher_.joinable()) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_cv_.notify_all();
  const uint64_t one = 1;
  if (write(wake_.get(), &one, sizeof one) < 0) {
    // The eventfd cannot be full; the watcher also checks stopping_ on every wake.
  }
  watcher_.join();
  reader_.join();
}

void DirSource::Watch() {
  for (;;) {
    pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      log_.Error("modules directory watch failed; changes are no longer seen",
                 {{"dir", dir_}, {"error", ErrnoStatus(errno, "poll", dir_).ToString()}});
      return;
    }
    std::lock_guard lock(mu_);
    if (stopping_ || (fds[1].revents & POLLIN) != 0) {
      return;
    }
    DrainLocked();
    ++events_;
    changed_cv_.notify_all();
  }
}

void DirSource::Read() {
  uint64_t handled = 0;  // events_ as of the last rescan
  std::unique_lock lock(mu_);
  for (;;) {
    // No deadline: nothing happens until inotify says so.
    changed_cv_.wait(lock, [&] { return stopping_ || events_ != handled; });
    if (!SettleLocked(lock)) {
      return;
    }
    handled = events_;
    const std::set<std::string> writing = writing_;
    lock.unlock();
    Rescan(/*initial=*/false, writing);
    lock.lock();
  }
}

bool DirSource::SettleLocked(std::unique_lock<std::mutex>& lock) {
  const Clock::Monotonic give_up = clock_.MonotonicNow() + 20 * debounce_;
  while (!stopping_) {
    const uint64_t seen = events_;
    const Clock::Monotonic quiet = std::min(give_up, clock_.MonotonicNow() + debounce_);
    const bool woken = clock_.WaitUntil(lock, changed_cv_, quiet,
                                        [&] { return stopping_ || events_ != seen; });
    if (!woken || clock_.MonotonicNow() >= give_up) {
      return !stopping_;
    }
  }
  return false;
}

void DirSource::DrainLocked() {
  alignas(inotify_event) char buf[8192];
  for (;;) {
    const ssize_t n = read(inotify_.get(), buf, sizeof buf);
    if (n <= 0) {
      return;
    }
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      if ((ev->mask & IN_Q_OVERFLOW) != 0) {
        writing_.clear();  // events were lost: the next full read decides
      } else if (ev->len > 0) {
        const std::string path = (fs::path(dir_) / ev->name).string();
        if ((ev->mask & IN_MODIFY) != 0) {
          writing_.insert(path);
        } else if ((ev->mask & (IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)) != 0) {
          writing_.erase(path);
        }
      }
      if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) != 0) {
        log_.Error("modules directory removed or moved; the Modules in force are kept",
                   {{"dir", dir_}});
      }
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
    }
  }
}

void DirSource::WarnKubernetesOnly(const std::vector<ModuleChanges>& changes) {
  for (const ModuleChanges& c : changes) {
    for (const std::string& key : c.removed) {
      kube_only_.erase(key);
    }
    for (const api::Module& m : c.set) {
      const std::vector<api::FieldError> fields = api::KubernetesOnlyFields(m);
      std::string paths;
      for (const api::FieldError& f : fields) {
        absl::StrAppend(&paths, paths.empty() ? "" : ",", f.path);
      }
      if (paths.empty()) {
        kube_only_.erase(m.Key());
        continue;
      }
      std::string& warned = kube_only_[m.Key()];
      if (warned == paths) {
        continue;
      }
      warned = paths;
      for (const api::FieldError& f : fields) {
        log_.Warn("Module field not acted on in standalone mode",
                  {{"module", m.Key()}, {"field", f.path}, {"why", f.message}});
      }
    }
  }
}

void DirSource::Rescan(bool initial, const std::set<std::string>& writing) {
  std::error_code ec;
  std::optional<std::vector<std::string>> found = ListManifests(dir_, ec);
  if (!found) {
    // Unknown is not absent: a directory we cannot read deletes nothing.
    log_.Error("cannot read the modules directory; the Modules in force are kept",
               {{"dir", dir_}, {"error", ec.message()}});
    return;
  }
  const std::vector<std::string> listed = *std::move(found);
  SourceUpdate update;
  auto record = [&update](ModuleChanges c) {
    if (!c.empty()) {
      update.changes.push_back(std::move(c));
    }
  };
  for (const auto& known : files_.Files()) {
    if (!std::binary_search(listed.begin(), listed.end(), known)) {
      record(files_.Update(known, std::nullopt));
    }
  }
  for (const auto& file : listed) {
    if (writing.count(file) != 0) {
      continue;  // half written: its close wakes us again
    }
    absl::StatusOr<std::string> text = ReadFile(file);
    if (text.ok()) {
      record(files_.Update(file, *text));
    } else if (absl::IsNotFound(text.status())) {
      record(files_.Update(file, std::nullopt));  // deleted since listed
    } else {
      log_.Error("cannot read a Module manifest; its Modules in force are kept",
                 {{"file", file}, {"error", text.status().ToString()}});
    }
  }
  WarnKubernetesOnly(update.changes);
  update.errors = files_.Errors();
  update.module_count = files_.ModuleCount();
  const bool errors_changed =
      update.errors.size() != reported_.size() ||
      !std::equal(update.errors.begin(), update.errors.end(), reported_.begin(),
                  [](const api::Diagnostic& a, const api::Diagnostic& b) {
                    return a.ToString() == b.ToString();
                  });
  if (errors_changed) {
    for (const auto& e : update.errors) {
      log_.Warn("Module manifest rejected; the Modules it defined before are kept",
                DiagnosticFields(e));
    }
    reported_ = update.errors;
  }
  std::map<std::string, api::ModulePolicy> policies = files_.Policies();
  const bool policies_changed = initial || policies != policies_;
  if (policies_changed) {
    policies_ = policies;
    update.policies = std::move(policies);
  }
  if (!initial && update.changes.empty() && !errors_changed && !policies_changed) {
    return;
  }
  size_t set = 0;
  size_t removed = 0;
  for (const auto& c : update.changes) {
    set += c.set.size();
    removed += c.removed.size();
  }
  log_.Info("modules read", {{"dir", dir_},
                             {"modules", static_cast<int64_t>(update.module_count)},
                             {"changed", static_cast<int64_t>(set)},
                             {"removed", static_cast<int64_t>(removed)},
                             {"errors", static_cast<int64_t>(update.errors.size())}});
  on_update_(update);
}

}  // namespace kmodd::source
