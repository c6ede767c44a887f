#include "common/fd.h"

#include <unistd.h>

#include <cerrno>

#include "common/file.h"

namespace kmodd {

Fd::~Fd() {
  if (fd_ >= 0) {
    close(fd_);
  }
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) {
      close(fd_);
    }
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

absl::Status Fd::Close(const std::string& display) {
  if (fd_ < 0) {
    return absl::OkStatus();
  }
  if (close(std::exchange(fd_, -1)) != 0 && errno != EINTR) {
    return ErrnoStatus(errno, "close", display);
  }
  return absl::OkStatus();
}

}  // namespace kmodd
