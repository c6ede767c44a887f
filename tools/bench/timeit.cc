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

namespace {

long long NowMicros(clockid_t clock = CLOCK_MONOTONIC) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  const char* out_path = nullptr;
  if (i < argc && std::strcmp(argv[i], "--now") == 0) {
    std::printf("%lld\n", NowMicros());
    return 0;
  }
  if (i < argc && std::strcmp(argv[i], "--clocks") == 0) {
    const long long mono = NowMicros();
    const long long real = NowMicros(CLOCK_REALTIME);
    std::printf("%lld %lld\n", mono, real);
    return 0;
  }
  if (i + 1 < argc && std::strcmp(argv[i], "-o") == 0) {
    out_path = argv[i + 1];
    i += 2;
  }
  if (i < argc && std::strcmp(argv[i], "--") == 0) {
    ++i;
  }
  if (i >= argc) {
    std::fprintf(stderr, "usage: timeit [-o FILE] [--] COMMAND [ARG]...\n       timeit --now\n       timeit --clocks\n");
    return 2;
  }
  const long long start = NowMicros();
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("timeit: fork");
    return 125;
  }
  if (pid == 0) {
    execvp(argv[i], argv + i);
    std::fprintf(stderr, "timeit: %s: %s\n", argv[i], std::strerror(errno));
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
  FILE* out = out_path != nullptr ? std::fopen(out_path, "a") : stderr;
  if (out == nullptr) {
    std::fprintf(stderr, "timeit: %s: %s\n", out_path, std::strerror(errno));
    return 125;
  }
  std::fprintf(out, "%lld %lld %d\n", start, elapsed, rc);
  if (out != stderr) {
    std::fclose(out);
  }
  return rc;
}
