#include "firmware/files.h"

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

std::string NewName(std::string_view base) { return absl::StrCat(".", S(base), S(kNewSuffix)); }
std::string OldName(std::string_view base) { return absl::StrCat(".", S(base), S(kOldSuffix)); }

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
  if (absl::Status s = internal::CheckName(name, display); !s.ok()) {
    return s;
  }
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
    if (absl::Status s = WriteAll(out, buf.data(), *got, display); !s.ok()) {
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

}  // namespace kmodd::firmware
