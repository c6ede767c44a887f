#pragma once

// The unix socket of the local Agent service, and who may use it. Two barriers, each enough
// on its own:
//
// 1. The socket file is only ever bound inside a directory that is the agent's and mode
//    0700, so no other user can reach it by path (a socket file's own mode is set only
//    after bind(), and not every system checks it on connect()). When the configured
//    socket's directory is already such a directory (or missing, then created so), the
//    socket is bound there. Otherwise (a shared directory such as a hostPath /run/kmodd that
//    kubelet made 0755, or /tmp), the agent makes PATH.d (0700) beside it, binds PATH.d/NAME
//    and puts a symlink at PATH to it, so clients keep using PATH. A PATH.d that exists and
//    is not the agent's, or a PATH that is neither a socket nor a symlink, is refused.
// 2. Every accepted connection's peer is read with SO_PEERCRED and closed unless it is root
//    or the agent's own effective uid. gRPC does not expose a unix peer's credentials (its
//    "local" credentials never ask), so the agent accepts connections itself and hands the
//    admitted ones to gRPC (grpc::AddInsecureChannelFromFd).

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "common/fd.h"

namespace kmodd::agent {

// PATH.d: where the socket for PATH is bound when PATH's directory is shared.
std::string PrivateSocketDir(const std::string& socket_path);
// What the link at PATH then holds: NAME.d/NAME (relative, so it works wherever the
// directory is mounted).
std::string PrivateSocketLink(const std::string& socket_path);

struct BoundSocket {
  Fd fd;                     // listening, non-blocking
  std::string path;          // as configured: what clients connect to
  std::string bound;         // the socket file itself (== path, or PATH.d/NAME)
  std::string private_dir;   // PATH.d when the agent made one, else ""
};

// Binds and listens on a unix socket for `socket_path` as described above. The error names
// the path and says what to do.
[[nodiscard]] absl::StatusOr<BoundSocket> BindPrivateSocket(const std::string& socket_path);

// Removes what BindPrivateSocket made: the socket file, the symlink at PATH (only while it
// still points at the socket) and PATH.d (only when empty). Best effort.
void RemoveBoundSocket(const BoundSocket& s);

// Root, or the agent's own effective uid (tests run the agent unprivileged).
bool PeerAllowed(uid_t uid);

struct RefusedPeer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Accepts connections on a listening socket on its own thread; hands each one whose peer
// PeerAllowed admits to `admit` (which takes the fd), closes the others after telling
// `refused`. Callbacks run on the accepting thread and must not throw.
class PeerCheckedAcceptor {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<PeerCheckedAcceptor>> Start(
      int listening_fd, std::function<void(int fd)> admit,
      std::function<void(const RefusedPeer&)> refused);
  ~PeerCheckedAcceptor();
  PeerCheckedAcceptor(const PeerCheckedAcceptor&) = delete;
  PeerCheckedAcceptor& operator=(const PeerCheckedAcceptor&) = delete;

  // Returns once the thread has stopped: no `admit` runs after this.
  void Stop();
  int64_t refused() const { return refused_.load(); }

 private:
  PeerCheckedAcceptor(int listening_fd, Fd wake, std::function<void(int fd)> admit,
                      std::function<void(const RefusedPeer&)> refused);
  void Loop();

  int listening_fd_;
  Fd wake_;  // an eventfd: Stop writes it
  std::function<void(int fd)> admit_;
  std::function<void(const RefusedPeer&)> on_refused_;
  std::atomic<int64_t> refused_{0};
  std::thread thread_;
};

}  // namespace kmodd::agent
