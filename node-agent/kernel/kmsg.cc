#include "node-agent/kernel/kmsg.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kmodd::kernel {

std::string_view KmsgText(std::string_view record) {
  if (const size_t semi = record.find(';'); semi != std::string_view::npos) {
    record.remove_prefix(semi + 1);
  }
  return record.substr(0, record.find('\n'));
}

absl::StatusOr<KmsgReader> KmsgReader::OpenAtEnd(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    return absl::UnavailableError(
        absl::StrCat("cannot open ", path, " to read the kernel log: ", std::strerror(errno)));
  }
  if (::lseek(fd.get(), 0, SEEK_END) < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot move to the end of ", path, ": ", std::strerror(errno)));
  }
  return KmsgReader(std::move(fd));
}

absl::Status KmsgReader::ReadNew(const std::function<void(std::string_view)>& line,
                                 int max_records) {
  char buf[8192];  // a record is at most about 1 KiB of text plus its dictionary
  for (int i = 0; i < max_records; ++i) {
    const ssize_t n = ::read(fd_.get(), buf, sizeof(buf));
    if (n > 0) {
      line(KmsgText(std::string_view(buf, static_cast<size_t>(n))));
      continue;
    }
    if (n < 0 && errno == EPIPE) {
      continue;  // overwritten before we read it; the next read goes on with the oldest left
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n == 0 || errno == EAGAIN) {
      return absl::OkStatus();
    }
    return absl::UnavailableError(absl::StrCat("reading the kernel log: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kmodd::kernel
