#pragma once

// Owns a file descriptor: the one RAII type for raw fds in kmodd (firmware staging and
// image extraction walk trees with openat and keep directory fds open).

#include <string>
#include <utility>

#include "absl/status/status.h"

namespace kmodd {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership.
  int release() { return std::exchange(fd_, -1); }
  // Closes now, reporting the error (a write-back failure shows here on some file systems).
  [[nodiscard]] absl::Status Close(const std::string& display);

 private:
  int fd_ = -1;
};

}  // namespace kmodd
