#pragma once

// Runs a program (no shell: argv as given) and collects what it prints, stdout and stderr
// together, for the build's log. Never throws.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmodd::build {

struct ProcessResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string output;
};

// The output is capped at max_output bytes (the head is dropped: the tail says why).
[[nodiscard]] absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                                       size_t max_output = size_t{4} << 20);

// The last `lines` lines of `text`.
std::string Tail(const std::string& text, int lines);

}  // namespace kmodd::build
