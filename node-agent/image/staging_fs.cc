#include "node-agent/image/staging_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "node-agent/image/layer_path.h"

namespace kmodd::image {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

std::string Join(std::string_view dir, std::string_view name) {
  return dir.empty() ? std::string(name) : absl::StrCat(std::string(dir), "/", std::string(name));
}

absl::Status NotADirectory(const Fd& dir, const std::string& name, const std::string& display) {
  struct stat st {};
  if (fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(display, ": is a symlink; refusing to write through it"));
  }
  return absl::InvalidArgumentError(absl::StrCat(display, ": is not a directory"));
}

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

absl::StatusOr<Fd> OpenDirPath(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus(errno, "open directory", path);
  }
  return Fd(fd);
}

absl::StatusOr<Fd> MakeDirsBeneath(const Fd& root, std::string_view rel) {
  Fd cur(fcntl(root.get(), F_DUPFD_CLOEXEC, 0));
  if (!cur.valid()) {
    return ErrnoStatus(errno, "dup", "staging root");
  }
  std::string walked;
  for (std::string_view part : Components(rel)) {
    const std::string name(part);
    walked = Join(walked, name);
    int fd = openat(cur.get(), name.c_str(), kDirFlags);
    if (fd < 0 && errno == ENOENT) {
      if (mkdirat(cur.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus(errno, "mkdir", walked);
      }
      fd = openat(cur.get(), name.c_str(), kDirFlags);
    }
    if (fd < 0) {
      if (errno == ELOOP || errno == ENOTDIR) {
        return NotADirectory(cur, name, walked);
      }
      return ErrnoStatus(errno, "open directory", walked);
    }
    cur = Fd(fd);
  }
  return cur;
}

absl::StatusOr<std::optional<Fd>> OpenDirIfPresent(const Fd& root, std::string_view rel) {
  Fd cur(fcntl(root.get(), F_DUPFD_CLOEXEC, 0));
  if (!cur.valid()) {
    return ErrnoStatus(errno, "dup", "staging root");
  }
  std::string walked;
  for (std::string_view part : Components(rel)) {
    const std::string name(part);
    walked = Join(walked, name);
    const int fd = openat(cur.get(), name.c_str(), kDirFlags);
    if (fd < 0) {
      if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) {
        return std::optional<Fd>();
      }
      return ErrnoStatus(errno, "open directory", walked);
    }
    cur = Fd(fd);
  }
  return std::optional<Fd>(std::move(cur));
}

absl::StatusOr<NodeKind> KindOf(const Fd& dir, const std::string& name,
                                const std::string& display) {
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
    const std::string path = Join(rel, name);
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

}  // namespace kmodd::image
