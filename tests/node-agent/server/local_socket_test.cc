// Who can use the agent's unix socket: the 0700 directory it is bound in, and the
// SO_PEERCRED check on every connection. Clients of another uid are forked children that
// drop to nobody (65534): these tests run as root.

#include <catch2/catch.hpp>

#include <grpcpp/grpcpp.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kmodd/v1/agent.grpc.pb.h"
#include "node-agent/server/local_service.h"
#include "server_rig.h"

namespace fs = std::filesystem;
namespace v1 = kmodd::v1;

namespace {

constexpr uid_t kNobody = 65534;

// How a child's connection went (its exit code).
enum ChildSaw : int {
  kClosedUnanswered = 10,  // accepted by the kernel, closed by the agent before a byte
  kServerAnswered = 11,    // the gRPC server sent its HTTP/2 settings
  kNoAccess = 12,          // connect(): EACCES, the directory kept it out
  kSetupFailed = 13,       // could not become nobody (a test problem, not the agent's)
  kOtherError = 14,
  kTimedOut = 15,
};

// Forks a child that becomes uid/gid 65534 (optionally keeping CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH, which take it through any directory mode, as a compromised but
// unprivileged-uid process might), connects to `path`, speaks the HTTP/2 client preface and
// reports what it saw. Only async-signal-safe calls in the child.
int ConnectAsNobody(const std::string& path, bool keep_dac_override) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (keep_dac_override && ::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) {
      ::_exit(kSetupFailed);
    }
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(kSetupFailed);
    }
    if (keep_dac_override) {
      __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2] = {};
      data[0].permitted = data[0].effective =
          (1U << CAP_DAC_OVERRIDE) | (1U << CAP_DAC_READ_SEARCH);
      if (::syscall(SYS_capset, &header, data) != 0) {
        ::_exit(kSetupFailed);
      }
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::_exit(errno == EACCES ? kNoAccess : kOtherError);
    }
    // The client preface and an empty SETTINGS frame: a gRPC server answers with its own.
    static const char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
    (void)::send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL);
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) {
      ::_exit(kTimedOut);
    }
    char buf[64];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    ::_exit(n > 0 ? kServerAnswered : kClosedUnanswered);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

struct stat Stat(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

int Mode(const std::string& path) { return static_cast<int>(Stat(path).st_mode & 07777); }

// An agent service that only answers Status; enough to see who gets through.
struct SocketRig {
  kmodd::testing::TempDir dir{"server"};
  kmodd::RealClock clock;
  kmodd::agent::AgentState state{clock};
  std::unique_ptr<kmodd::agent::LocalService> service;

  SocketRig() {
    kmodd::agent::LocalServiceDeps deps;
    deps.state = &state;
    deps.facts.name = "node-a";
    service = std::make_unique<kmodd::agent::LocalService>(std::move(deps), clock);
  }
  bool StatusOk(const std::string& socket) {
    auto stub = v1::Agent::NewStub(
        grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::StatusResponse r;
    return stub->Status(&ctx, v1::StatusRequest(), &r).ok() && r.node().name() == "node-a";
  }
};

}  // namespace

TEST_CASE("a client of another uid that can reach the socket is refused by its peer credentials",
          "[server][local][socket]") {
  SocketRig r;
  const std::string socket = r.dir.path + "/run/kmodd/agent.sock";
  auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
  REQUIRE(server.ok());
  // Through the directory (it keeps CAP_DAC_OVERRIDE), but not uid 0: closed unanswered.
  CHECK(ConnectAsNobody(socket, true) == kClosedUnanswered);
  // Root still gets in, after the refusal as before it.
  CHECK(r.StatusOk(socket));
}

TEST_CASE("a client of another uid cannot reach the socket at all: its directory is 0700",
          "[server][local][socket]") {
  SocketRig r;
  const std::string socket = r.dir.path + "/run/kmodd/agent.sock";
  auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
  REQUIRE(server.ok());
  CHECK(Mode(r.dir.path + "/run/kmodd") == 0700);
  CHECK(ConnectAsNobody(socket, false) == kNoAccess);
}

TEST_CASE("a refused client is logged with its uid and counted", "[server][local][socket]") {
  SocketRig r;
  const std::string socket = r.dir.path + "/agent.sock";
  const std::string log_path = r.dir.path + "/log.json";
  std::FILE* log_file = std::fopen(log_path.c_str(), "w");
  REQUIRE(log_file != nullptr);
  {
    kmodd::Logger log(log_file);
    auto server = kmodd::agent::LocalServer::Start(socket, *r.service, &log);
    REQUIRE(server.ok());
    CHECK(ConnectAsNobody(socket, true) == kClosedUnanswered);
    CHECK(r.StatusOk(socket));
    CHECK((*server)->refused_peers() == 1);
  }
  std::fclose(log_file);
  std::ifstream in(log_path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("local client refused: only root may use the agent socket"));
  CHECK_THAT(text, Catch::Contains("\"uid\":65534"));
}

TEST_CASE("a socket in a shared directory is bound in a private PATH.d the agent makes, linked from PATH",
          "[server][local][socket]") {
  SocketRig r;
  // As kubelet makes a hostPath DirectoryOrCreate: 0755, root's, and not the agent's alone.
  const std::string shared = r.dir.path + "/run-kmodd";
  fs::create_directories(shared);
  REQUIRE(::chmod(shared.c_str(), 0755) == 0);
  const std::string socket = shared + "/agent.sock";
  auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
  REQUIRE(server.ok());

  // The socket file itself sits in a directory that is the agent's and 0700.
  const std::string bound = fs::canonical(socket).string();
  CHECK(bound == fs::canonical(shared).string() + "/agent.sock.d/agent.sock");
  CHECK(Stat(fs::path(bound).parent_path()).st_uid == ::geteuid());
  CHECK(Mode(fs::path(bound).parent_path()) == 0700);
  CHECK(Mode(bound) == 0600);
  CHECK(Mode(shared) == 0755);  // a directory the agent did not make is never changed
  // Clients keep using the configured path.
  CHECK(r.StatusOk(socket));
  CHECK(ConnectAsNobody(socket, false) == kNoAccess);
  CHECK(ConnectAsNobody(socket, true) == kClosedUnanswered);

  (*server)->Stop();
  CHECK(fs::is_empty(shared));
  // Started again (the link and PATH.d from a previous run, as after kill -9): the same.
  server = kmodd::agent::LocalServer::Start(socket, *r.service);
  REQUIRE(server.ok());
  CHECK(r.StatusOk(socket));
}

TEST_CASE("a socket path the agent cannot make private is refused, naming it and what to do",
          "[server][local][socket]") {
  SocketRig r;
  const std::string shared = r.dir.path + "/shared";
  fs::create_directories(shared);
  REQUIRE(::chmod(shared.c_str(), 0755) == 0);
  const std::string socket = shared + "/agent.sock";

  SECTION("PATH.d exists and is someone else's") {
    fs::create_directories(socket + ".d");
    REQUIRE(::chown((socket + ".d").c_str(), kNobody, kNobody) == 0);
    auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
    REQUIRE_FALSE(server.ok());
    CHECK_THAT(std::string(server.status().message()),
               Catch::Contains(socket + ".d exists and belongs to uid 65534") &&
                   Catch::Contains("remove it, or choose another --socket"));
    CHECK_FALSE(fs::exists(fs::symlink_status(socket)));
  }
  SECTION("PATH.d is a symlink") {
    fs::create_directories(r.dir.path + "/elsewhere");
    fs::create_directory_symlink(r.dir.path + "/elsewhere", socket + ".d");
    auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
    REQUIRE_FALSE(server.ok());
    CHECK_THAT(std::string(server.status().message()), Catch::Contains("is a symlink"));
    CHECK(fs::is_empty(r.dir.path + "/elsewhere"));
  }
  SECTION("PATH is a regular file") {
    std::ofstream(socket) << "not a socket";
    auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
    REQUIRE_FALSE(server.ok());
    CHECK(std::string(server.status().message()) ==
          socket + " exists and is not a socket; remove it, or choose another --socket");
    CHECK(fs::is_regular_file(fs::symlink_status(socket)));
  }
  SECTION("the directory is writable by everyone without the sticky bit") {
    REQUIRE(::chmod(shared.c_str(), 0777) == 0);
    auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
    REQUIRE_FALSE(server.ok());
    CHECK_THAT(std::string(server.status().message()),
               Catch::Contains("is writable by everyone without the sticky bit"));
    CHECK(fs::is_empty(shared));
  }
}

TEST_CASE("a socket directory reached through a symlink (/var/run -> /run) is taken as it resolves",
          "[server][local][socket]") {
  SocketRig r;
  const std::string real = r.dir.path + "/run";
  fs::create_directories(real);
  REQUIRE(::chmod(real.c_str(), 0700) == 0);
  fs::create_directory_symlink(real, r.dir.path + "/var-run");
  const std::string socket = r.dir.path + "/var-run/agent.sock";
  auto server = kmodd::agent::LocalServer::Start(socket, *r.service);
  REQUIRE(server.ok());
  CHECK((*server)->bound_path() == socket);  // private already: no PATH.d
  CHECK(fs::is_socket(fs::symlink_status(real + "/agent.sock")));
  CHECK(r.StatusOk(socket));
}
