#include "controller/build/process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kmodd::build {

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv, size_t max_output) {
  if (argv.empty()) {
    return absl::InvalidArgumentError("no program to run");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
    }
    execvp(args[0], args.data());
    const std::string msg = absl::StrCat("cannot run ", argv[0], ": ", std::strerror(errno), "\n");
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    _exit(127);
  }
  close(fds[1]);
  ProcessResult r;
  char buf[65536];
  while (true) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;
    }
    r.output.append(buf, static_cast<size_t>(n));
    if (r.output.size() > max_output) {
      r.output.erase(0, r.output.size() - max_output);
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Tail(const std::string& text, int lines) {
  size_t at = text.size();
  while (at > 0 && text[at - 1] == '\n') {
    --at;
  }
  const size_t end = at;
  int seen = 0;
  while (at > 0) {
    if (text[at - 1] == '\n' && ++seen == lines) {
      break;
    }
    --at;
  }
  return text.substr(at, end - at);
}

}  // namespace kmodd::build
