#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kmodd {

absl::Status ErrnoStatus(int err, std::string_view op, std::string_view path) {
  const std::string msg =
      absl::StrCat(std::string(path), ": ", std::string(op), ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return absl::ResourceExhaustedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EINTR:
    case EAGAIN:
    case EBUSY:
      return absl::UnavailableError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ErrnoStatus(errno, "cannot open", path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  }
  return ss.str();
}

absl::Status WriteFileAtomic(const std::string& path, std::string_view content, int mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string tmp = absl::StrCat(path, ".tmp-XXXXXX");
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    return ErrnoStatus(errno, "cannot create temporary file", tmp);
  }
  auto fail = [&](const char* op) {
    const int err = errno;
    close(fd);
    unlink(tmp.c_str());
    return ErrnoStatus(err, op, tmp);
  };
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return fail("write");
    }
    done += static_cast<size_t>(n);
  }
  if (fchmod(fd, static_cast<mode_t>(mode)) != 0) {
    return fail("chmod");
  }
  if (fsync(fd) != 0) {
    return fail("fsync");
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(err, "close", tmp);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(err, "rename into place", path);
  }
  const int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);  // best effort: the rename is already visible
    close(dfd);
  }
  return absl::OkStatus();
}

}  // namespace kmodd
