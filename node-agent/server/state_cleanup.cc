#include "node-agent/server/state_cleanup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "node-agent/server/local_socket.h"

namespace kmodd::agent {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOurs[] = {"journal.json", "desired.pb", "firmware-ledger.json", "images",
                                 "firmware"};

bool Ours(const std::string& name) {
  for (const char* known : kOurs) {
    // The name itself, its lock file, or a temporary file of an atomic write to it
    // (NAME.tmp-XXXXXX).
    if (name == known || name == absl::StrCat(known, ".lock") ||
        absl::StartsWith(name, absl::StrCat(known, ".tmp-"))) {
      return true;
    }
  }
  return false;
}

// A directory on another filesystem than its parent: a mount (a hostPath volume in a pod,
// a dedicated disk). It cannot be removed from here; lost+found in it is the filesystem's.
bool MountPoint(const fs::path& dir) {
  struct stat self {};
  struct stat parent {};
  return ::stat(dir.c_str(), &self) == 0 &&
         ::stat((dir / "..").c_str(), &parent) == 0 &&
         (self.st_dev != parent.st_dev || self.st_ino == parent.st_ino);
}

// rmdir: true when gone; a mount point (EBUSY) or a non-empty directory is reported in
// `out.left` with why.
void RemoveDir(const fs::path& dir, StateCleanup& out) {
  if (MountPoint(dir)) {
    out.left.push_back(absl::StrCat(dir.string(), ": a mount point, emptied (remove it on the host)"));
    return;
  }
  if (::rmdir(dir.c_str()) == 0) {
    out.removed.push_back(dir.string());
    return;
  }
  const int err = errno;
  if (err == ENOENT) {
    return;
  }
  if (err == EBUSY) {
    out.left.push_back(absl::StrCat(dir.string(), ": a mount point, emptied (remove it on the host)"));
  } else if (err != ENOTEMPTY && err != EEXIST) {
    out.left.push_back(absl::StrCat(dir.string(), ": rmdir: ", std::strerror(err)));
  }
}

}  // namespace

StateCleanup RemoveAgentState(const std::string& state_dir, const std::string& socket_path) {
  StateCleanup out;
  std::error_code ec;
  const fs::path state(state_dir);
  bool foreign = false;
  if (fs::is_directory(state, ec)) {
    const bool mount_point = MountPoint(state);
    for (const auto& entry : fs::directory_iterator(state, ec)) {
      const std::string name = entry.path().filename().string();
      if (mount_point && name == "lost+found") {
        continue;
      }
      if (!Ours(name)) {
        foreign = true;
        out.left.push_back(absl::StrCat(entry.path().string(), ": not written by kmodd, left"));
        continue;
      }
      std::error_code rm_ec;
      fs::remove_all(entry.path(), rm_ec);
      if (rm_ec) {
        out.left.push_back(absl::StrCat(entry.path().string(), ": ", rm_ec.message()));
        foreign = true;
      } else {
        out.removed.push_back(entry.path().string());
      }
    }
    if (ec) {
      out.left.push_back(absl::StrCat(state_dir, ": ", ec.message()));
    } else if (!foreign) {
      RemoveDir(state, out);
    }
  }
  if (!socket_path.empty()) {
    const fs::path socket(socket_path);
    std::error_code sock_ec;
    // In a shared directory the socket is PATH.d/NAME behind a link at PATH (local_socket.h):
    // the link, that socket and PATH.d go; a link to anything else is not ours.
    const fs::path private_dir(PrivateSocketDir(socket_path));
    if (fs::is_symlink(socket, sock_ec) &&
        fs::read_symlink(socket, sock_ec).string() == PrivateSocketLink(socket_path)) {
      const fs::path inner = private_dir / socket.filename();
      if (fs::is_socket(fs::symlink_status(inner, sock_ec)) && fs::remove(inner, sock_ec)) {
        out.removed.push_back(inner.string());
      }
      if (fs::remove(socket, sock_ec)) {
        out.removed.push_back(socket.string());
      }
      if (fs::is_directory(fs::symlink_status(private_dir, sock_ec)) &&
          fs::is_empty(private_dir, sock_ec)) {
        RemoveDir(private_dir, out);
      }
    } else if (fs::is_socket(fs::symlink_status(socket, sock_ec))) {
      if (fs::remove(socket, sock_ec)) {
        out.removed.push_back(socket.string());
      } else if (sock_ec) {
        out.left.push_back(absl::StrCat(socket.string(), ": ", sock_ec.message()));
      }
    }
    // The socket's directory only when it is kmodd's own (named kmodd, as /run/kmodd) and
    // empty: never a directory shared with others.
    const fs::path parent = socket.parent_path();
    if (parent.filename() == "kmodd" && fs::is_directory(parent, sock_ec) &&
        fs::is_empty(parent, sock_ec)) {
      RemoveDir(parent, out);
    }
  }
  return out;
}

}  // namespace kmodd::agent
