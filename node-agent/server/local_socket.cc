#include "node-agent/server/local_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd::agent {

namespace {

namespace fs = std::filesystem;

constexpr int kBacklog = 64;
// After an accept error that leaves the connection queued (out of file descriptors), wait
// this long before the next try instead of spinning on it.
constexpr int kAcceptBackoffMs = 100;

// The socket's directory: the configured path's parent, "." for a bare name.
std::string ParentOf(const std::string& path) {
  std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

// Creates `dir` (its ancestors 0755, itself 0700) when it does not exist.
absl::Status CreatePrivateDir(const std::string& dir) {
  std::error_code ec;
  if (const fs::path up = fs::path(dir).parent_path(); !up.empty()) {
    fs::create_directories(up, ec);
    if (ec) {
      return ErrnoStatus(ec.value(), "cannot create the socket directory", up.string());
    }
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, "cannot create the socket directory", dir);
  }
  return absl::OkStatus();
}

// Whether `dir` is the agent's and 0700. `ours`: a directory the agent names itself (PATH.d,
// or one it has just created), opened without following a symlink, refused when another
// uid owns it, and tightened to 0700 when it is looser. Any other (the configured one) is
// taken as it resolves and never changed.
absl::StatusOr<bool> IsPrivateDir(const std::string& dir, bool ours) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (ours ? O_NOFOLLOW : 0)));
  if (!fd.valid()) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrCat(
          "socket directory ", dir, " is not a directory (or is a symlink); remove it, or "
          "choose another --socket"));
    }
    return ErrnoStatus(errno, "cannot open the socket directory", dir);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return ErrnoStatus(errno, "fstat", dir);
  }
  if (st.st_uid != ::geteuid()) {
    if (ours) {
      return absl::FailedPreconditionError(absl::StrCat(
          "socket directory ", dir, " exists and belongs to uid ", st.st_uid,
          ", not to the agent (uid ", ::geteuid(), "); remove it, or choose another --socket"));
    }
    return false;
  }
  if ((st.st_mode & 077) == 0) {
    return true;
  }
  if (!ours) {
    return false;
  }
  if (::fchmod(fd.get(), 0700) != 0) {
    return ErrnoStatus(errno, "chmod 0700", dir);
  }
  return true;
}

// Whether `path` may be replaced by a new socket or link: absent, a socket (a previous
// run's) or a symlink (the link a previous run made). Anything else is refused, never deleted.
absl::StatusOr<bool> Replaceable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return false;
    }
    return ErrnoStatus(errno, "lstat", path);
  }
  if (!S_ISSOCK(st.st_mode) && !S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; remove it, or choose another --socket"));
  }
  return true;
}

absl::Status ClearForSocket(const std::string& path) {
  auto present = Replaceable(path);
  if (!present.ok()) {
    return present.status();
  }
  if (*present && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, "cannot remove the previous socket", path);
  }
  return absl::OkStatus();
}

absl::StatusOr<Fd> Listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "socket path ", path, " is ", path.size(), " bytes; a unix socket path holds at most ",
        sizeof(addr.sun_path) - 1, ": choose a shorter --socket"));
  }
  path.copy(addr.sun_path, path.size());
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    return ErrnoStatus(errno, "socket", path);
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus(errno, "bind", path);
  }
  // The directory keeps everyone else out from the bind on; the mode says the same.
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd.get(), kBacklog) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return ErrnoStatus(err, "chmod 0600 / listen", path);
  }
  return fd;
}

}  // namespace

std::string PrivateSocketDir(const std::string& socket_path) { return socket_path + ".d"; }

std::string PrivateSocketLink(const std::string& socket_path) {
  const std::string name = fs::path(socket_path).filename().string();
  return absl::StrCat(name, ".d/", name);
}

namespace {

// Whether the socket can be bound in its configured directory (true) or needs PATH.d
// (false); creates the directory 0700 when it is missing.
absl::StatusOr<bool> ConfiguredDirIsPrivate(const std::string& socket_path) {
  const std::string parent = ParentOf(socket_path);
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return ErrnoStatus(errno, "stat", parent);
    }
    if (auto s = CreatePrivateDir(parent); !s.ok()) {
      return s;
    }
    return IsPrivateDir(parent, true);
  }
  if (S_ISDIR(st.st_mode) && (st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "socket directory ", parent, " is writable by everyone without the sticky bit, so "
        "anyone could replace the socket; choose another --socket"));
  }
  return IsPrivateDir(parent, false);
}

// Where the socket file goes (BoundSocket without fd), with the paths cleared for it.
absl::StatusOr<BoundSocket> PlaceSocket(const std::string& socket_path) {
  auto is_private = ConfiguredDirIsPrivate(socket_path);
  if (!is_private.ok()) {
    return is_private.status();
  }
  // Everything that can refuse is checked before anything is made or replaced.
  if (auto ok = Replaceable(socket_path); !ok.ok()) {
    return ok.status();
  }
  BoundSocket out;
  out.path = socket_path;
  out.bound = socket_path;
  if (!*is_private) {
    out.private_dir = PrivateSocketDir(socket_path);
    if (::mkdir(out.private_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus(errno, "cannot create the socket directory", out.private_dir);
    }
    if (auto ok = IsPrivateDir(out.private_dir, true); !ok.ok()) {
      return ok.status();
    }
    out.bound = absl::StrCat(out.private_dir, "/", fs::path(socket_path).filename().string());
  }
  for (const std::string& p : {out.path, out.bound}) {
    if (auto s = ClearForSocket(p); !s.ok()) {
      if (!out.private_dir.empty()) {
        ::rmdir(out.private_dir.c_str());  // only when empty: nothing of ours is left
      }
      return s;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<BoundSocket> BindPrivateSocket(const std::string& socket_path) {
  if (socket_path.empty() || fs::path(socket_path).filename().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--socket \"", socket_path, "\" names no socket file; e.g. /run/kmodd/agent.sock"));
  }
  auto out = PlaceSocket(socket_path);
  if (!out.ok()) {
    return out.status();
  }
  auto fd = Listen(out->bound);  // removes its socket file again when it fails
  if (!fd.ok()) {
    if (!out->private_dir.empty()) {
      ::rmdir(out->private_dir.c_str());
    }
    return fd.status();
  }
  out->fd = std::move(*fd);
  if (!out->private_dir.empty() &&
      ::symlink(PrivateSocketLink(socket_path).c_str(), socket_path.c_str()) != 0) {
    const int err = errno;
    RemoveBoundSocket(*out);
    return ErrnoStatus(err, "cannot link the socket into place", socket_path);
  }
  return out;
}

void RemoveBoundSocket(const BoundSocket& s) {
  ::unlink(s.bound.c_str());
  if (s.private_dir.empty()) {
    return;
  }
  std::error_code ec;
  if (fs::is_symlink(s.path, ec) && fs::read_symlink(s.path, ec).string() == PrivateSocketLink(s.path)) {
    ::unlink(s.path.c_str());
  }
  ::rmdir(s.private_dir.c_str());
}

bool PeerAllowed(uid_t uid) { return uid == 0 || uid == ::geteuid(); }

PeerCheckedAcceptor::PeerCheckedAcceptor(int listening_fd, Fd wake,
                                         std::function<void(int fd)> admit,
                                         std::function<void(const RefusedPeer&)> refused)
    : listening_fd_(listening_fd), wake_(std::move(wake)), admit_(std::move(admit)),
      on_refused_(std::move(refused)) {}

absl::StatusOr<std::unique_ptr<PeerCheckedAcceptor>> PeerCheckedAcceptor::Start(
    int listening_fd, std::function<void(int fd)> admit,
    std::function<void(const RefusedPeer&)> refused) {
  Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) {
    return ErrnoStatus(errno, "eventfd", "the local socket's acceptor");
  }
  std::unique_ptr<PeerCheckedAcceptor> a(new PeerCheckedAcceptor(
      listening_fd, std::move(wake), std::move(admit), std::move(refused)));
  a->thread_ = std::thread([p = a.get()] { p->Loop(); });
  return a;
}

PeerCheckedAcceptor::~PeerCheckedAcceptor() { Stop(); }

void PeerCheckedAcceptor::Stop() {
  if (!thread_.joinable()) {
    return;
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void PeerCheckedAcceptor::Loop() {
  int wait_ms = -1;
  for (;;) {
    pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {listening_fd_, POLLIN, 0}};
    // After an error that leaves the connection queued, only the wake-up is watched.
    const int n = ::poll(fds, wait_ms < 0 ? 2 : 1, wait_ms);
    if (n < 0 && errno != EINTR) {
      wait_ms = kAcceptBackoffMs;
      continue;
    }
    if ((fds[0].revents & POLLIN) != 0) {
      return;
    }
    wait_ms = -1;
    if (n <= 0 || (fds[1].revents & POLLIN) == 0) {
      continue;
    }
    Fd conn(::accept4(listening_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        wait_ms = kAcceptBackoffMs;
      }
      continue;  // EAGAIN, ECONNABORTED, EINTR: the next connection
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    const bool known =
        ::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred);
    try {
      if (known && PeerAllowed(cred.uid)) {
        admit_(conn.release());
        continue;
      }
      refused_.fetch_add(1);
      on_refused_(RefusedPeer{known ? cred.pid : 0, known ? cred.uid : static_cast<uid_t>(-1),
                              known ? cred.gid : static_cast<gid_t>(-1)});
    } catch (...) {  // a callback's failure (bad_alloc while logging) costs one connection
    }
  }
}

}  // namespace kmodd::agent
