// Resolving directories beneath a root: openat2 where the kernel has it, the O_NOFOLLOW walk
// otherwise (see beneath.h). Entries inside a directory: beneath_tree.cc.

#include "common/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

// -1: no test override; otherwise a Resolver.
std::atomic<int> forced_resolver{-1};
// Set if openat2 ever says ENOSYS after the probe found it (a seccomp filter installed later).
std::atomic<bool> openat2_gone{false};

int RawOpenat2(int dir, const char* path, uint64_t flags, uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.resolve = resolve;
  const long fd = syscall(SYS_openat2, dir, path, &how, sizeof how);
  return fd < 0 ? -errno : static_cast<int>(fd);
}

// Any failure means no: ENOSYS from an old kernel, EPERM or ENOSYS from a container's seccomp
// filter, EINVAL for resolve flags it does not know. The walk is then all there is.
bool KernelHasOpenat2() {
  static const bool has = [] {
    const int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
      return false;
    }
    const int fd = RawOpenat2(root, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, kResolve);
    close(root);
    if (fd < 0) {
      return false;
    }
    close(fd);
    return true;
  }();
  return has && !openat2_gone.load(std::memory_order_relaxed);
}

// The components of `rel`, which must be names only (see beneath.h).
absl::StatusOr<std::vector<std::string_view>> Names(std::string_view rel) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("path \"", absl::CHexEscape(std::string(rel)),
                                                   "\": ", std::string(why),
                                                   "; a path beneath a root is names only"));
  };
  if (!rel.empty() && rel.front() == '/') {
    return bad("absolute");
  }
  if (rel.find('\0') != std::string_view::npos) {
    return bad("NUL byte");
  }
  std::vector<std::string_view> names = Components(rel);
  for (const std::string_view n : names) {
    if (n == "." || n == "..") {
      return bad("\".\" or \"..\" component");
    }
  }
  return names;
}

absl::StatusOr<Fd> Dup(const Fd& fd, const std::string& display) {
  const int copy = fcntl(fd.get(), F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    return ErrnoStatus(errno, "dup", display.empty() ? "." : display);
  }
  return Fd(copy);
}

bool IsSymlink(const Fd& dir, const std::string& name) {
  struct stat st {};
  return fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

DirWalk Ended(DirWalk::End end, size_t depth, std::string at) {
  DirWalk w;
  w.end = end;
  w.depth = depth;
  w.at = std::move(at);
  return w;
}

// Opens directory `name` in `dir`, creating it with exactly `create` when absent and asked.
// The descriptor, or -errno.
absl::StatusOr<int> OpenChild(const Fd& dir, const std::string& name, std::optional<mode_t> create,
                              const std::string& display) {
  int fd = openat(dir.get(), name.c_str(), kDirFlags);
  if (fd >= 0 || errno != ENOENT || !create) {
    return fd >= 0 ? fd : -errno;
  }
  if (mkdirat(dir.get(), name.c_str(), *create) != 0) {
    if (errno != EEXIST) {
      return ErrnoStatus(errno, "cannot create directory", display);
    }
    fd = openat(dir.get(), name.c_str(), kDirFlags);  // someone else's: its mode stays
    return fd >= 0 ? fd : -errno;
  }
  fd = openat(dir.get(), name.c_str(), kDirFlags);
  if (fd < 0) {
    return -errno;
  }
  Fd created(fd);
  if (fchmod(created.get(), *create) != 0) {  // mkdir's mode went through the umask
    return ErrnoStatus(errno, "cannot chmod directory", display);
  }
  return created.release();
}

// The fallback, and the diagnosis whenever openat2 did not open the whole path.
absl::StatusOr<DirWalk> WalkComponents(const Fd& root, const std::string& root_path,
                                       const std::vector<std::string_view>& names,
                                       std::optional<mode_t> create) {
  absl::StatusOr<Fd> current = Dup(root, root_path);
  if (!current.ok()) {
    return current.status();
  }
  std::string walked;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string name(names[i]);
    walked = JoinPath(walked, name);
    const std::string display = JoinPath(root_path, walked);
    absl::StatusOr<int> fd = OpenChild(*current, name, create, display);
    if (!fd.ok()) {
      return fd.status();
    }
    if (*fd < 0) {
      const int err = -*fd;
      if (err == ENOENT) {
        return Ended(DirWalk::kAbsent, i, walked);
      }
      if (err == ELOOP || err == ENOTDIR) {
        return Ended(IsSymlink(*current, name) ? DirWalk::kSymlink : DirWalk::kNotDirectory, i,
                     walked);
      }
      return ErrnoStatus(err, "cannot open directory", display);
    }
    *current = Fd(*fd);
  }
  DirWalk w;
  w.dir = *std::move(current);
  w.depth = names.size();
  return w;
}

absl::StatusOr<DirWalk> Walk(const Fd& root, const std::string& root_path, std::string_view rel,
                             std::optional<mode_t> create) {
  absl::StatusOr<std::vector<std::string_view>> names = Names(rel);
  if (!names.ok()) {
    return names.status();
  }
  if (!names->empty() && ActiveResolver() == Resolver::kOpenat2) {
    const int fd = internal::Openat2Dir(root.get(), JoinComponents(*names));
    if (fd >= 0) {
      DirWalk w;
      w.dir = Fd(fd);
      w.depth = names->size();
      return w;
    }
    if (fd == -ENOSYS) {
      openat2_gone.store(true, std::memory_order_relaxed);
    }
    // Whatever stopped openat2 (ENOENT, ELOOP, ENOTDIR, ENAMETOOLONG, EXDEV, EAGAIN, EACCES
    // ...), the walk finds where, and creates what is missing: it is as strict, only slower.
  }
  return WalkComponents(root, root_path, *names, create);
}

absl::Status Refuse(const DirWalk& w, const std::string& root_path) {
  const std::string display = JoinPath(root_path, w.at);
  if (w.end == DirWalk::kSymlink) {
    return absl::FailedPreconditionError(
        absl::StrCat(display, ": is a symbolic link; refusing to follow it"));
  }
  return absl::FailedPreconditionError(absl::StrCat(display, ": is not a directory"));
}

}  // namespace

namespace internal {

int Openat2Dir(int root, const std::string& rel) {
  return RawOpenat2(root, rel.c_str(), kDirFlags, kResolve);
}

absl::Status CheckName(std::string_view name, const std::string& display) {
  if (name.empty() || name == "." || name == ".." ||
      name.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(display, ": \"",
                                                   absl::CHexEscape(std::string(name)),
                                                   "\" is not a single name in a directory"));
  }
  return absl::OkStatus();
}

}  // namespace internal

Resolver ActiveResolver() {
  const int forced = forced_resolver.load(std::memory_order_relaxed);
  if (forced == static_cast<int>(Resolver::kWalk)) {
    return Resolver::kWalk;
  }
  return KernelHasOpenat2() ? Resolver::kOpenat2 : Resolver::kWalk;
}

ScopedResolverForTesting::ScopedResolverForTesting(Resolver resolver)
    : previous_(forced_resolver.exchange(static_cast<int>(resolver))) {}
ScopedResolverForTesting::~ScopedResolverForTesting() { forced_resolver.store(previous_); }

absl::StatusOr<Fd> OpenRoot(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus(errno, "cannot open directory", path);
  }
  return Fd(fd);
}

absl::StatusOr<DirWalk> WalkDir(const Fd& root, const std::string& root_path,
                                std::string_view rel) {
  return Walk(root, root_path, rel, std::nullopt);
}

absl::StatusOr<DirWalk> WalkDirCreating(const Fd& root, const std::string& root_path,
                                        std::string_view rel, mode_t mode) {
  return Walk(root, root_path, rel, mode);
}

absl::StatusOr<DirProbe> ProbeDir(const Fd& root, const std::string& root_path,
                                  std::string_view rel_dir) {
  absl::StatusOr<DirWalk> w = WalkDir(root, root_path, rel_dir);
  if (!w.ok()) {
    return w.status();
  }
  DirProbe probe;
  switch (w->end) {
    case DirWalk::kOpened:
      probe.dir = std::move(w->dir);
      return probe;
    case DirWalk::kAbsent: {
      std::vector<std::string> prefixes = DirPrefixes(JoinComponents(Components(rel_dir)));
      probe.missing.assign(prefixes.begin() + static_cast<std::ptrdiff_t>(w->depth),
                           prefixes.end());
      return probe;
    }
    case DirWalk::kSymlink:
    case DirWalk::kNotDirectory:
      break;
  }
  return Refuse(*w, root_path);
}

absl::StatusOr<Fd> MakeDirs(const Fd& root, const std::string& root_path,
                            std::string_view rel_dir) {
  absl::StatusOr<DirWalk> w = WalkDirCreating(root, root_path, rel_dir, 0755);
  if (!w.ok()) {
    return w.status();
  }
  switch (w->end) {
    case DirWalk::kOpened:
      return std::move(w->dir);
    case DirWalk::kAbsent:
      return absl::UnavailableError(
          absl::StrCat(JoinPath(root_path, w->at), ": vanished after being created"));
    case DirWalk::kSymlink:
    case DirWalk::kNotDirectory:
      break;
  }
  return Refuse(*w, root_path);
}

absl::StatusOr<std::optional<Fd>> OpenRegular(const Fd& dir, std::string_view name,
                                              const std::string& display) {
  if (absl::Status s = internal::CheckName(name, display); !s.ok()) {
    return s;
  }
  const std::string n(name);
  auto wrong_kind = [&] {
    return absl::FailedPreconditionError(
        absl::StrCat(display, IsSymlink(dir, n) ? ": is a symbolic link; refusing to follow it"
                                                : ": is not a regular file"));
  };
  struct stat st {};
  // Checked before opening so that opening never has a device's or a FIFO's side effects.
  if (fstatat(dir.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return std::optional<Fd>();
    }
    return ErrnoStatus(errno, "cannot stat", display);
  }
  if (!S_ISREG(st.st_mode)) {
    return wrong_kind();
  }
  // O_NONBLOCK: if it became a FIFO since, opening fails or returns instead of waiting.
  const int fd = openat(dir.get(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return std::optional<Fd>();
    }
    if (errno == ELOOP) {
      return wrong_kind();
    }
    return ErrnoStatus(errno, "cannot open", display);
  }
  Fd file(fd);
  if (fstat(file.get(), &st) != 0) {
    return ErrnoStatus(errno, "cannot stat", display);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(display, ": is not a regular file"));
  }
  return std::optional<Fd>(std::move(file));
}

absl::StatusOr<std::optional<Fd>> OpenRegularBeneath(const Fd& root, const std::string& root_path,
                                                     std::string_view rel) {
  absl::StatusOr<std::vector<std::string_view>> names = Names(rel);
  if (!names.ok()) {
    return names.status();
  }
  const auto [parent, base] = SplitParent(JoinComponents(*names));
  absl::StatusOr<DirProbe> probe = ProbeDir(root, root_path, parent);
  if (!probe.ok()) {
    return probe.status();
  }
  if (!probe->dir) {
    return std::optional<Fd>();
  }
  return OpenRegular(*probe->dir, base, JoinPath(root_path, rel));
}

}  // namespace kmodd
