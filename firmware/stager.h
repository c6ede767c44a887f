#pragma once

// Firmware staging for the agent: copies a driver image's firmware into the host's firmware
// directory and keeps a ledger of which module owns which file.
//
// Layout. The *contents* of the image's firmwarePath land directly in firmware_dir:
// <src>/kmm_ci_fw/fw.bin becomes <firmware_dir>/kmm_ci_fw/fw.bin, which is where the kernel's
// request_firmware("kmm_ci_fw/fw.bin") looks. KMM copies into <firmware_dir>/<module>/..., a
// level no driver asks for (a reported KMM bug); kmodd does not.
//
// Ownership. Owners are opaque ids ("namespace/name"). A path may be shared by several owners
// when their bytes are identical; it is deleted when its last owner lets go. A file that was
// already in firmware_dir before kmodd, byte for byte what an owner brings, is recorded as
// *foreign*: owners share it, but kmodd never deletes it. kmodd never overwrites or deletes a
// file whose content is not what its ledger says kmodd wrote.
//
// Safety. Only regular files are staged; symlinks, devices, FIFOs and sockets in an image are
// errors. Paths below both roots never follow a symlink (see common/beneath.h), so nothing is
// ever read or written through a symlink, inside firmware_dir or outside it.
//
// Concurrency. A Stager holds an exclusive lock on `<ledger_path>.lock` for its lifetime: one
// Stager per ledger, and its methods are not thread-safe. They do blocking I/O: call them off
// the event loop.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "firmware/files.h"
#include "firmware/ledger.h"

namespace kmodd::firmware {

struct StagerOptions {
  // Absolute. Created (0755) on the first Stage when missing.
  std::string firmware_dir = "/var/lib/firmware";
  std::string ledger_path = "/var/lib/kmodd/firmware-ledger.json";
  // The firmware_class.path parameter file, e.g. /sys/module/firmware_class/parameters/path.
  // While kmodd owns any file it points the kernel at firmware_dir, and restores the previous
  // value when the last owner is released. Empty: never touched.
  std::string class_path_param;
};

struct StagedFile {
  std::string path;  // relative to firmware_dir
  uint64_t size = 0;
  std::string digest;  // "fnv1a64:...": an identity check, not a security hash
  std::vector<std::string> owners;
  bool foreign = false;  // was there before kmodd; never deleted by kmodd
};

class Stager {
 public:
  // Takes the lock and loads the ledger. An absent ledger is an empty one; a corrupt one is a
  // DataLoss error naming it, never silently reset. Finishes what a crash interrupted.
  [[nodiscard]] static absl::StatusOr<Stager> Open(StagerOptions options);

  Stager(Stager&&) = default;
  Stager& operator=(Stager&&) = default;

  // Makes `owner`'s staged set exactly the regular files under `source_dir` (recursively),
  // at the same relative paths under firmware_dir; files the owner had and no longer brings
  // are released. All or nothing: on error nothing of this call is left behind. Returns the
  // relative paths, sorted. Idempotent.
  // Errors: InvalidArgument for a bad image (non-regular file, unusable name);
  // FailedPrecondition for a conflict (a path owned by another owner, or present and not
  // kmodd's, with different bytes; a symlink inside firmware_dir) naming the path and owners.
  // An error from firmware_class.path comes after the files are staged: calling again retries.
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> Stage(const std::string& owner,
                                                               const std::string& source_dir);

  // Removes `owner` from every path; deletes files left without owners (never foreign ones)
  // and then the empty directories kmodd created (never firmware_dir). Idempotent.
  [[nodiscard]] absl::Status Release(const std::string& owner);

  // The ledger, by path.
  std::vector<StagedFile> List() const;

  const StagerOptions& options() const { return options_; }

 private:
  Stager(StagerOptions options, Fd lock, Ledger ledger);

  // Writes `next` as the ledger, then adopts it; on error the ledger in memory is unchanged.
  [[nodiscard]] absl::Status Save(Ledger next);
  // Settles every pending file (see stager.cc) and removes empty directories kmodd created.
  [[nodiscard]] absl::Status Recover();
  // Points firmware_class.path at firmware_dir while kmodd owns files; restores it after.
  [[nodiscard]] absl::Status SyncClassPath();
  [[nodiscard]] absl::StatusOr<Fd> OpenFirmwareDir(bool create) const;

  StagerOptions options_;
  Fd lock_;
  Ledger ledger_;
};

}  // namespace kmodd::firmware
