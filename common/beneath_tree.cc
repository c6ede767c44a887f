// Entries inside a directory already opened beneath a root (beneath.cc opens it): what a name
// is, removing and pruning without crossing a symlink, writing, flushing.

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/beneath.h"
#include "common/file.h"

namespace kmodd {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// The names in `dir`, read before any of them is changed.
absl::StatusOr<std::vector<std::string>> ListNames(const Fd& dir, const std::string& display) {
  const int copy = fcntl(dir.get(), F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    return ErrnoStatus(errno, "dup", display);
  }
  DIR* d = fdopendir(copy);
  if (d == nullptr) {
    const int err = errno;
    close(copy);
    return ErrnoStatus(err, "opendir", display);
  }
  rewinddir(d);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = readdir(d)) {
    const std::string_view n(e->d_name);
    if (n != "." && n != "..") {
      names.emplace_back(n);
    }
    errno = 0;
  }
  const int err = errno;
  closedir(d);
  if (err != 0) {
    return ErrnoStatus(err, "readdir", display);
  }
  return names;
}

}  // namespace

absl::StatusOr<NodeKind> KindOf(const Fd& dir, const std::string& name,
                                const std::string& display) {
  if (absl::Status s = internal::CheckName(name, display); !s.ok()) {
    return s;
  }
  struct stat st {};
  if (fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return NodeKind::kAbsent;
    }
    return ErrnoStatus(errno, "stat", display);
  }
  if (S_ISDIR(st.st_mode)) {
    return NodeKind::kDirectory;
  }
  return S_ISREG(st.st_mode) ? NodeKind::kRegular : NodeKind::kOther;
}

absl::Status RemoveBeneath(const Fd& dir, const std::string& name, const std::string& display) {
  absl::StatusOr<NodeKind> kind = KindOf(dir, name, display);
  if (!kind.ok()) {
    return kind.status();
  }
  if (*kind == NodeKind::kAbsent) {
    return absl::OkStatus();
  }
  if (*kind == NodeKind::kDirectory) {
    // O_NOFOLLOW: if it became a symlink since KindOf, this fails instead of emptying its
    // target.
    const int fd = openat(dir.get(), name.c_str(), kDirFlags);
    if (fd < 0) {
      return ErrnoStatus(errno, "open directory", display);
    }
    const Fd child(fd);
    absl::Status pruned = PruneDir(child, display, [](const std::string&) { return false; });
    if (!pruned.ok()) {
      return pruned;
    }
  }
  if (unlinkat(dir.get(), name.c_str(), *kind == NodeKind::kDirectory ? AT_REMOVEDIR : 0) != 0 &&
      errno != ENOENT) {
    return ErrnoStatus(errno, "remove", display);
  }
  return absl::OkStatus();
}

absl::Status PruneDir(const Fd& dir, const std::string& rel,
                      absl::FunctionRef<bool(const std::string&)> keep) {
  absl::StatusOr<std::vector<std::string>> names = ListNames(dir, rel);
  if (!names.ok()) {
    return names.status();
  }
  for (const std::string& name : *names) {
    const std::string path = JoinPath(rel, name);
    if (!keep(path)) {
      if (absl::Status s = RemoveBeneath(dir, name, path); !s.ok()) {
        return s;
      }
      continue;
    }
    const int fd = openat(dir.get(), name.c_str(), kDirFlags);
    if (fd < 0) {
      if (errno == ENOTDIR || errno == ELOOP) {
        continue;  // a kept file or symlink: nothing beneath it
      }
      return ErrnoStatus(errno, "open directory", path);
    }
    const Fd child(fd);
    if (absl::Status s = PruneDir(child, path, keep); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status WriteAll(const Fd& fd, const char* data, size_t n, const std::string& display) {
  while (n > 0) {
    const ssize_t done = write(fd.get(), data, n);
    if (done < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoStatus(errno, "write", display);
    }
    data += done;
    n -= static_cast<size_t>(done);
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const Fd& dir, const std::string& display) {
  if (fsync(dir.get()) != 0 && errno != EINVAL) {
    return ErrnoStatus(errno, "fsync directory", display);
  }
  return absl::OkStatus();
}

}  // namespace kmodd
