#pragma once

// Applies one layer's tar entries to a staging tree: the policy half of extraction (the
// format half is tar_reader.h). Entries outside the keep filter are dropped after their path
// is checked; kept entries are written with OCI whiteout semantics and these rules:
//
//  - regular files, directories, symlinks and hardlinks only: a kept device, fifo or entry
//    of unknown type rejects the image. (Dropped ones are harmless: they are never created,
//    and distribution bases that KMM images are built on do carry them.)
//  - a kept regular file with the setuid or setgid bit rejects the image: no driver tree
//    needs one, and it would be the first step of using the agent to plant a root shell.
//    The sticky bit, and any special bit on a directory, is stripped: without ownership
//    they mean nothing.
//  - modes are capped: files (mode & 0755) | 0600, directories (mode & 0755) | 0700.
//    Ownership and timestamps are not applied: everything belongs to the agent.
//  - symlink targets must satisfy CheckSymlinkTarget; hardlinks must name a regular file
//    already written beneath the root.
//  - no write, create or removal follows a symlink (common/beneath.h): a component that is
//    a symlink or not a directory rejects the image; whiteouts and removals act on the link,
//    never on what it points to.
//
// Every error is "entry \"<path as in the archive>\": <rule>"; the sink prefixes the layer.

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/beneath.h"
#include "node-agent/image/layer_limits.h"
#include "common/oci/layer_path.h"
#include "common/oci/tar_reader.h"

namespace kmodd::image {

// The paths one layer wrote, each stored once. A path counts as touched when it or anything
// beneath it was written, which is what whiteouts and opaque markers ask; storing every
// prefix of every path instead would cost the sum of the prefixes' lengths, quadratic in a
// path's depth (hundreds of MiB for a small layer of deep, long paths).
class TouchedPaths {
 public:
  // False when `path` is already there.
  bool Insert(const std::string& path);
  // Whether `path`, or a path beneath it, was inserted.
  bool Covers(const std::string& path) const;
  uint64_t size() const { return paths_.size(); }
  uint64_t bytes() const { return bytes_; }

 private:
  std::set<std::string> paths_;  // sorted: the paths beneath "a/" follow "a/" at once
  uint64_t bytes_ = 0;
};

class LayerWriter final : public TarVisitor {
 public:
  // `root`, `filter`, `limits` and `stats` outlive the writer; `stats` accumulates across
  // the image's layers, and the limits are checked against it.
  LayerWriter(const Fd& root, const KeepFilter& filter, const Limits& limits, ApplyStats& stats)
      : root_(root), filter_(filter), limits_(limits), stats_(stats) {}

  absl::Status OnEntry(const TarEntry& entry) override;
  absl::Status OnData(const char* data, size_t n) override;
  absl::Status OnEntryEnd() override;

 private:
  absl::Status CheckLimits(const TarEntry& e);
  absl::Status ApplyWhiteout(const Whiteout& w);
  absl::Status WriteEntry(const TarEntry& e, const std::string& path);
  absl::Status WriteHardlink(const TarEntry& e, const std::string& path, const Fd& dir,
                             const std::string& name);
  // The directory `rel`, created if missing; cached for runs of entries in one directory.
  absl::StatusOr<const Fd*> ParentDir(const std::string& rel);
  // Every removal goes through here: it may delete the cached directory.
  absl::Status Remove(const Fd& dir, const std::string& name, const std::string& path);
  // Records `path` as written by this layer (what whiteouts leave alone), within the
  // per-layer caps on the paths kept in memory.
  absl::Status Touch(const std::string& path);
  // InvalidArgument "entry \"<path>\": <rule>".
  absl::Status Reject(std::string_view rule) const;
  // The same prefix on an error from below, keeping its code (ENOSPC stays retryable).
  absl::Status Annotate(const absl::Status& s) const;

  const Fd& root_;
  const KeepFilter& filter_;
  const Limits& limits_;
  ApplyStats& stats_;

  TouchedPaths touched_;
  std::string cached_dir_path_;
  Fd cached_dir_;
  std::string entry_path_;  // as in the archive, for messages
  Fd file_;                 // the regular file being written, if any
  mode_t file_mode_ = 0;
};

}  // namespace kmodd::image
