#pragma once

// Writes the Hub's status to a file (YAML, replaced atomically) whenever it changes, at
// most once per `min_interval` of `clock` (the hub's), so that a burst of reports from
// thousands of agents costs a few writes, not thousands. `kmodd-controller status` reads
// the file.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "controller/server/hub.h"

namespace kmodd::server {

class StatusWriter {
 public:
  StatusWriter(Hub& hub, std::string path, const Clock& clock, Logger& log,
               std::chrono::milliseconds min_interval = std::chrono::milliseconds(100));
  ~StatusWriter();
  StatusWriter(const StatusWriter&) = delete;
  StatusWriter& operator=(const StatusWriter&) = delete;

  void Start();
  // Writes a last time and stops.
  void Stop();

 private:
  void Run();
  void WriteOnce();

  Hub& hub_;
  const std::string path_;
  const Clock& clock_;
  Logger& log_;
  const std::chrono::milliseconds min_interval_;
  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::string last_error_;  // logged once until it changes
  std::thread thread_;
};

}  // namespace kmodd::server
