// timeit: runs a command and records when it started and how long it took, on
// CLOCK_MONOTONIC, in microseconds. For the guest of the real-kernel rig, whose busybox
// has no sub-second clock (`date +%N` is not supported) and whose /proc/uptime counts in
// centiseconds.
//
// usage: timeit [-o FILE] [--] COMMAND [ARG]...
//   Appends "START_US ELAPSED_US EXIT_STATUS" to FILE (default: stderr) and exits with the
//   command's status. The span covers fork, exec and the whole command: what a caller
//   pays. COMMAND is looked up in PATH.
//   timeit --now prints the current CLOCK_MONOTONIC time in microseconds.
//   timeit --clocks prints "MONOTONIC_US REALTIME_US", read back to back: the offset that
//   puts a wall-clock time (a daemon's log or status timestamp) on CLOCK_MONOTONIC.

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/flags.h"

namespace {

long long NowMicros(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  bool now = false;
  bool clocks = false;
  std::vector<std::string> command;
  kmodd::flags::FlagSet flags(
      "timeit", "usage: timeit [-o FILE] [--] COMMAND [ARG]...\n       timeit --now\n"
                "       timeit --clocks\n");
  flags.String("-o", "FILE", "append \"START_US ELAPSED_US EXIT_STATUS\" here (default: stderr)",
               &out_path);
  flags.Switch("--now", "print the current CLOCK_MONOTONIC time in microseconds", &now);
  flags.Switch("--clocks", "print \"MONOTONIC_US REALTIME_US\", read back to back", &clocks);
  flags.Rest("COMMAND", "the command and its arguments, looked up in PATH", &command);
  flags.StopAtFirstPositional();  // the command's own flags are its
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  if (now) {
    std::printf("%lld\n", NowMicros());
    return 0;
  }
  if (clocks) {
    const long long mono = NowMicros();
    const long long real = NowMicros(CLOCK_REALTIME);
    std::printf("%lld %lld\n", mono, real);
    return 0;
  }
  if (command.empty()) {
    return flags.UsageError(std::cerr, "no COMMAND to run");
  }
  std::vector<char*> exec_argv;
  exec_argv.reserve(command.size() + 1);
  for (std::string& word : command) {
    exec_argv.push_back(word.data());
  }
  exec_argv.push_back(nullptr);
  const long long start = NowMicros();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("timeit: fork");
    return 125;
  }
  if (pid == 0) {
    execvp(exec_argv[0], exec_argv.data());
    std::fprintf(stderr, "timeit: %s: %s\n", exec_argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      std::perror("timeit: waitpid");
      return 125;
    }
  }
  const long long elapsed = NowMicros() - start;
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  FILE* out = !out_path.empty() ? std::fopen(out_path.c_str(), "a") : stderr;
  if (out == nullptr) {
    std::fprintf(stderr, "timeit: %s: %s\n", out_path.c_str(), std::strerror(errno));
    return 125;
  }
  std::fprintf(out, "%lld %lld %d\n", start, elapsed, rc);
  if (out != stderr) {
    std::fclose(out);
  }
  return rc;
}
