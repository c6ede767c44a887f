#include "firmware/beneath.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd::firmware {
namespace {

constexpr size_t kChunk = size_t{64} * 1024;
constexpr std::string_view kNewSuffix = ".kmodd-new";
constexpr std::string_view kOldSuffix = ".kmodd-old";

std::string S(std::string_view s) { return std::string(s); }

// Says what `name` in `dir` is, for a path that should have been a directory or a file.
absl::Status WrongKind(const Fd& dir, const std::string& name, const std::string& display,
                       const char* wanted) {
  struct stat st {};
  if (fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(display, ": is a symbolic link; refusing to follow it"));
  }
  return absl::FailedPreconditionError(absl::StrCat(display, ": is not a ", wanted));
}

absl::StatusOr<Fd> Dup(const Fd& fd, const std::string& display) {
  const int copy = fcntl(fd.get(), F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    return ErrnoStatus(errno, "dup", display);
  }
  return Fd(copy);
}

// Opens directory `name` in `dir`, never through a symlink. nullopt when absent.
absl::StatusOr<std::optional<Fd>> OpenChildDir(const Fd& dir, const std::string& name,
                                               const std::string& display) {
  const int fd = openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    return std::optional<Fd>(Fd(fd));
  }
  const int err = errno;
  if (err == ENOENT) {
    return std::optional<Fd>();
  }
  if (err == ELOOP || err == ENOTDIR) {
    return WrongKind(dir, name, display, "directory");
  }
  return ErrnoStatus(err, "cannot open directory", display);
}

// Reads up to `n` bytes at `offset`; fewer only at end of file.
absl::StatusOr<size_t> ReadAt(const Fd& fd, char* buf, size_t n, off_t offset,
                              const std::string& display) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = pread(fd.get(), buf + done, n - done, offset + static_cast<off_t>(done));
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoStatus(errno, "read", display);
    }
    if (got == 0) {
      break;
    }
    done += static_cast<size_t>(got);
  }
  return done;
}

absl::Status WriteAll(int fd, const char* buf, size_t n, const std::string& display) {
  size_t done = 0;
  while (done < n) {
    const ssize_t put = write(fd, buf + done, n - done);
    if (put < 0) {
      if (errno == EINTR) {
        continue;
      }
      return ErrnoStatus(errno, "write", display);
    }
    done += static_cast<size_t>(put);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckRelativePath(std::string_view rel) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", S(rel), "\": ", S(why)));
  };
  if (rel.empty()) {
    return bad("empty path");
  }
  if (rel.front() == '/') {
    return bad("absolute path; must be relative to the firmware directory");
  }
  for (const char c : rel) {
    if (c < 0x20 || c > 0x7e) {
      return bad("only printable ASCII is accepted in firmware paths");
    }
  }
  for (size_t start = 0; start <= rel.size();) {
    size_t end = rel.find('/', start);
    if (end == std::string_view::npos) {
      end = rel.size();
    }
    const std::string_view part = rel.substr(start, end - start);
    start = end + 1;
    if (part.empty() || part == ".") {
      return bad("empty or \".\" component");
    }
    if (part == "..") {
      return bad("\"..\" component would leave the firmware directory");
    }
    if (part.front() == '.' && (part.ends_with(kNewSuffix) || part.ends_with(kOldSuffix))) {
      return bad("name reserved for kmodd's temporary files");
    }
  }
  return absl::OkStatus();
}

std::pair<std::string, std::string> SplitParent(std::string_view rel) {
  const size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) {
    return {"", S(rel)};
  }
  return {S(rel.substr(0, slash)), S(rel.substr(slash + 1))};
}

std::vector<std::string> DirPrefixes(std::string_view rel_dir) {
  std::vector<std::string> out;
  if (rel_dir.empty()) {
    return out;
  }
  for (size_t i = 0; i <= rel_dir.size(); ++i) {
    if (i == rel_dir.size() || rel_dir[i] == '/') {
      out.push_back(S(rel_dir.substr(0, i)));
    }
  }
  return out;
}

std::string JoinPath(std::string_view root, std::string_view rel) {
  if (rel.empty()) {
    return S(root);
  }
  if (!root.empty() && root.back() == '/') {
    return absl::StrCat(S(root), S(rel));
  }
  return absl::StrCat(S(root), "/", S(rel));
}

std::string NewName(std::string_view base) { return absl::StrCat(".", S(base), S(kNewSuffix)); }
std::string OldName(std::string_view base) { return absl::StrCat(".", S(base), S(kOldSuffix)); }

absl::StatusOr<Fd> OpenRoot(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus(errno, "cannot open directory", path);
  }
  return Fd(fd);
}

absl::StatusOr<DirProbe> ProbeDir(const Fd& root, const std::string& root_path,
                                  std::string_view rel_dir) {
  absl::StatusOr<Fd> current = Dup(root, root_path);
  if (!current.ok()) {
    return current.status();
  }
  const std::vector<std::string> prefixes = DirPrefixes(rel_dir);
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const std::string name = SplitParent(prefixes[i]).second;
    auto child = OpenChildDir(*current, name, JoinPath(root_path, prefixes[i]));
    if (!child.ok()) {
      return child.status();
    }
    if (!child->has_value()) {
      DirProbe probe;
      probe.missing.assign(prefixes.begin() + static_cast<std::ptrdiff_t>(i), prefixes.end());
      return probe;
    }
    *current = std::move(**child);
  }
  DirProbe probe;
  probe.dir = std::move(*current);
  return probe;
}

absl::StatusOr<Fd> MakeDirs(const Fd& root, const std::string& root_path,
                            std::string_view rel_dir) {
  absl::StatusOr<Fd> current = Dup(root, root_path);
  if (!current.ok()) {
    return current.status();
  }
  for (const std::string& prefix : DirPrefixes(rel_dir)) {
    const std::string name = SplitParent(prefix).second;
    const std::string display = JoinPath(root_path, prefix);
    auto child = OpenChildDir(*current, name, display);
    if (!child.ok()) {
      return child.status();
    }
    if (!child->has_value()) {
      if (mkdirat(current->get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus(errno, "cannot create directory", display);
      }
      child = OpenChildDir(*current, name, display);
      if (!child.ok()) {
        return child.status();
      }
      if (!child->has_value()) {
        return absl::UnavailableError(absl::StrCat(display, ": vanished after being created"));
      }
      fchmod((*child)->get(), 0755);  // mkdir's mode went through the umask
    }
    *current = std::move(**child);
  }
  return current;
}

absl::StatusOr<std::optional<Fd>> OpenRegular(const Fd& dir, std::string_view name,
                                              const std::string& display) {
  const std::string n = S(name);
  struct stat st {};
  // Checked before opening so that opening never has a device's or a FIFO's side effects.
  if (fstatat(dir.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return std::optional<Fd>();
    }
    return ErrnoStatus(errno, "cannot stat", display);
  }
  if (!S_ISREG(st.st_mode)) {
    return WrongKind(dir, n, display, "regular file");
  }
  const int fd = openat(dir.get(), n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return std::optional<Fd>();
    }
    if (errno == ELOOP) {
      return WrongKind(dir, n, display, "regular file");
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
  const auto [parent, base] = SplitParent(rel);
  auto probe = ProbeDir(root, root_path, parent);
  if (!probe.ok()) {
    return probe.status();
  }
  if (!probe->dir) {
    return std::optional<Fd>();
  }
  return OpenRegular(*probe->dir, base, JoinPath(root_path, rel));
}

absl::StatusOr<Identity> ReadIdentity(const Fd& file, const std::string& display) {
  std::string buf(kChunk, '\0');
  ContentHasher hasher;
  off_t offset = 0;
  while (true) {
    auto got = ReadAt(file, buf.data(), buf.size(), offset, display);
    if (!got.ok()) {
      return got.status();
    }
    hasher.Update(buf.data(), *got);
    offset += static_cast<off_t>(*got);
    if (*got < buf.size()) {
      return hasher.Result();
    }
  }
}

absl::StatusOr<bool> SameBytes(const Fd& a, const Fd& b, const std::string& display) {
  struct stat sa {};
  struct stat sb {};
  if (fstat(a.get(), &sa) != 0 || fstat(b.get(), &sb) != 0) {
    return ErrnoStatus(errno, "cannot stat", display);
  }
  if (sa.st_size != sb.st_size) {
    return false;
  }
  std::string ba(kChunk, '\0');
  std::string bb(kChunk, '\0');
  off_t offset = 0;
  while (true) {
    auto na = ReadAt(a, ba.data(), ba.size(), offset, display);
    auto nb = ReadAt(b, bb.data(), bb.size(), offset, display);
    if (!na.ok()) {
      return na.status();
    }
    if (!nb.ok()) {
      return nb.status();
    }
    if (*na != *nb || std::memcmp(ba.data(), bb.data(), *na) != 0) {
      return false;
    }
    if (*na < ba.size()) {
      return true;
    }
    offset += static_cast<off_t>(*na);
  }
}

absl::StatusOr<Identity> CopyInto(const Fd& src, const Fd& dir, std::string_view name,
                                  const std::string& display) {
  const std::string n = S(name);
  // O_NOFOLLOW: a symlink left under this name is refused, not written through.
  // O_NONBLOCK: a FIFO under this name fails instead of waiting for a reader.
  const int raw = openat(dir.get(), n.c_str(),
                         O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (raw < 0) {
    return ErrnoStatus(errno, "cannot create", display);
  }
  Fd out(raw);
  auto fail = [&](absl::Status status) {
    out = Fd();
    unlinkat(dir.get(), n.c_str(), 0);
    return status;
  };
  struct stat st {};
  if (fstat(out.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    out = Fd();  // not ours to unlink
    return absl::FailedPreconditionError(absl::StrCat(display, ": is not a regular file"));
  }
  std::string buf(kChunk, '\0');
  ContentHasher hasher;
  off_t offset = 0;
  while (true) {
    auto got = ReadAt(src, buf.data(), buf.size(), offset, display);
    if (!got.ok()) {
      return fail(got.status());
    }
    if (absl::Status s = WriteAll(out.get(), buf.data(), *got, display); !s.ok()) {
      return fail(s);
    }
    hasher.Update(buf.data(), *got);
    offset += static_cast<off_t>(*got);
    if (*got < buf.size()) {
      break;
    }
  }
  if (fchmod(out.get(), 0644) != 0) {
    return fail(ErrnoStatus(errno, "chmod", display));
  }
  if (fsync(out.get()) != 0) {
    return fail(ErrnoStatus(errno, "fsync", display));
  }
  if (close(out.release()) != 0) {
    return fail(ErrnoStatus(errno, "close", display));
  }
  return hasher.Result();
}

absl::Status SyncDir(const Fd& dir, const std::string& display) {
  if (fsync(dir.get()) != 0 && errno != EINVAL) {
    return ErrnoStatus(errno, "fsync directory", display);
  }
  return absl::OkStatus();
}

}  // namespace kmodd::firmware
