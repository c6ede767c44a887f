#pragma once

// One image layer made of a few files (the signed modules that go on top of an unsigned
// image): a POSIX ustar stream, gzip-compressed, with its digests. Deterministic: the same
// files give the same bytes (mtime 0, owner 0:0, zlib's default level, no name or time in
// the gzip header), so that signing the same image twice pushes the same layer.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kmodd::sign {

struct LayerFile {
  std::string path;  // in the image, without a leading '/': "opt/lib/modules/K/a.ko"
  std::string data;
  uint32_t mode = 0644;
};

struct BuiltLayer {
  std::string tar;      // uncompressed
  std::string gzip;     // what is pushed
  std::string diff_id;  // sha256 of `tar`: the image config's rootfs.diff_ids entry
  std::string digest;   // sha256 of `gzip`: the manifest's layer digest
};

// The files, each parent directory first (0755). A path that a ustar header cannot hold
// (a name part over 100 bytes, or a prefix over 155), an empty path, or a ".." part is
// refused naming the path.
[[nodiscard]] absl::StatusOr<BuiltLayer> BuildLayer(const std::vector<LayerFile>& files);

}  // namespace kmodd::sign
