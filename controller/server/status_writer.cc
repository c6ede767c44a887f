#include "controller/server/status_writer.h"

#include <cstdint>
#include <utility>

#include "common/file.h"
#include "common/value.h"

namespace kmodd::server {

StatusWriter::StatusWriter(Hub& hub, std::string path, const Clock& clock, Logger& log,
                           std::chrono::milliseconds min_interval)
    : hub_(hub), path_(std::move(path)), clock_(clock), log_(log), min_interval_(min_interval) {}

StatusWriter::~StatusWriter() { Stop(); }

void StatusWriter::Start() { thread_ = std::thread(&StatusWriter::Run, this); }

void StatusWriter::Stop() {
  if (!thread_.joinable()) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  hub_.WakeAll();
  thread_.join();
  WriteOnce();
}

void StatusWriter::WriteOnce() {
  const std::string text = ToYaml(ToValue(hub_.Status()));
  absl::Status st = WriteFileAtomic(path_, text);
  if (!st.ok() && st.ToString() != last_error_) {
    last_error_ = st.ToString();
    log_.Error("cannot write the status file", {{"path", path_}, {"error", last_error_}});
  } else if (st.ok() && !last_error_.empty()) {
    last_error_.clear();
    log_.Info("status file written again", {{"path", path_}});
  }
}

void StatusWriter::Run() {
  uint64_t seen = UINT64_MAX;  // write once at start
  for (;;) {
    const uint64_t now = hub_.WaitForChange(seen, std::chrono::seconds(1));
    {
      std::unique_lock lock(mu_);
      if (stopping_) {
        return;
      }
    }
    if (now == seen) {
      continue;
    }
    seen = now;
    WriteOnce();
    // Let changes gather: the next write sees all of them.
    std::unique_lock lock(mu_);
    if (clock_.WaitFor(lock, stop_cv_, min_interval_, [this] { return stopping_; })) {
      return;
    }
  }
}

}  // namespace kmodd::server
