#pragma once

// The kernel log from a point on, for readiness checks (api/readiness.h, kind kernelLog):
// a reader opened on /dev/kmsg and moved to its end sees exactly the records the kernel
// writes after that moment, whatever their timestamps say.

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/fd.h"

namespace kmodd::kernel {

class KmsgReader {
 public:
  // Opens /dev/kmsg (`path` for tests) non-blocking, at its end.
  [[nodiscard]] static absl::StatusOr<KmsgReader> OpenAtEnd(const std::string& path = "/dev/kmsg");

  // Calls `line` with the text of each record written since the last call (at most
  // `max_records`, so a flood cannot hold the caller); records the kernel overwrote before
  // they were read are skipped. Never blocks.
  absl::Status ReadNew(const std::function<void(std::string_view)>& line, int max_records = 4096);

 private:
  explicit KmsgReader(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

// The message of one /dev/kmsg record ("6,339,5140900,-;text\n continuation"): the text
// after the first ';' up to the first newline; the whole record when it has no ';'.
std::string_view KmsgText(std::string_view record);

}  // namespace kmodd::kernel
