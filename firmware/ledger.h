#pragma once

// The firmware ledger: which files under the firmware directory kmodd put there, for whom,
// and what they contain. It is the only memory kmodd has of the firmware directory, so it is
// never guessed: an absent file is an empty ledger, an unreadable one is an error.
//
// On disk it is JSON, always replaced whole (WriteFileAtomic):
//   {"version": 1, "firmwareDir": "/var/lib/firmware", "savedClassPath": "",
//    "files": [{"path": "kmm_ci_fw/fw.bin", "size": 3, "digest": "fnv1a64:...",
//               "owners": ["ns/a"], "foreign": false}],
//    "createdDirs": ["kmm_ci_fw"], "pending": []}

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "firmware/identity.h"

namespace kmodd::firmware {

struct LedgerEntry {
  Identity identity;
  std::set<std::string> owners;  // never empty in a saved ledger
  // The file was already in the firmware directory, byte for byte, when its first owner
  // claimed it. kmodd did not write it and never deletes it.
  bool foreign = false;

  bool operator==(const LedgerEntry&) const = default;
};

// A file kmodd may have created or may be about to delete, recorded before the filesystem is
// touched so that a crash in between is undone on the next start (see stager.cc). It does not
// claim the file: only `files` does.
struct PendingFile {
  std::string path;
  Identity identity;

  bool operator==(const PendingFile&) const = default;
};

struct Ledger {
  std::string firmware_dir;
  std::map<std::string, LedgerEntry> files;  // by path relative to firmware_dir
  // Directories kmodd created, relative to firmware_dir; removed again once empty.
  std::set<std::string> created_dirs;
  std::vector<PendingFile> pending;
  // firmware_class.path as it was before kmodd pointed it at firmware_dir; set while kmodd
  // owns any file (see Stager::SyncClassPath).
  std::optional<std::string> saved_class_path;

  bool operator==(const Ledger&) const = default;

  bool HasOwners() const { return !files.empty(); }
  // True when forgetting the ledger would lose nothing.
  bool Empty() const {
    return files.empty() && created_dirs.empty() && pending.empty() && !saved_class_path;
  }
};

// Owners are opaque, but must be non-empty printable ASCII ("namespace/name"). InvalidArgument.
[[nodiscard]] absl::Status CheckOwner(std::string_view owner);

std::string LedgerToJson(const Ledger& ledger);

// Parses and validates a ledger; every path in it is checked as strictly relative, so a
// tampered ledger cannot make kmodd delete outside the firmware directory. Errors are
// DataLoss and name `file`.
[[nodiscard]] absl::StatusOr<Ledger> ParseLedger(std::string_view text, const std::string& file);

}  // namespace kmodd::firmware
