#pragma once

// Bounds on what one image may make the agent do, and counters of what it did. Limits apply
// to every entry of every layer, kept or dropped: a layer is parsed whole either way.

#include <cstddef>
#include <cstdint>

namespace kmodd::image {

struct Limits {
  // File data across all layers. Driver images that ship a distribution base (KMM images
  // often carry kmod and a shell) and big GPU stacks reach a few GiB.
  uint64_t max_total_bytes = uint64_t{16} << 30;
  // Entries across all layers (a full distribution base is some 10^4 to 10^5).
  uint64_t max_entries = 1'000'000;
  // One file's data (the largest .ko and firmware blobs are ~100 MiB; CUDA libraries in
  // dropped paths reach 1 GiB).
  uint64_t max_file_bytes = uint64_t{4} << 30;
  // An entry's path or link target, in bytes as in the archive (Linux's PATH_MAX).
  size_t max_path_bytes = 4096;
  // Components in an entry's path. Bounds the directories open at once while pruning.
  size_t max_path_depth = 128;
  // Decompressed bytes per compressed byte within one layer, checked once the layer has
  // produced ratio_grace_bytes. Real layers compress 2-10:1; a bomb compresses ~1000:1.
  // 0 disables the check.
  uint64_t max_ratio = 100;
  uint64_t ratio_grace_bytes = uint64_t{16} << 20;
  // What one layer's writer remembers of the paths it extracted (to apply whiteouts and
  // opaque markers to lower layers only): kept entries, and the bytes of their paths. Kept
  // paths are a driver tree and its firmware, some 10^4 entries; the caps bound the agent's
  // memory for a hostile layer of many long, deep paths.
  uint64_t max_layer_paths = 250'000;
  uint64_t max_layer_path_bytes = uint64_t{32} << 20;
};

struct ApplyStats {
  uint64_t layers = 0;
  uint64_t entries = 0;     // every tar entry, kept or dropped
  uint64_t data_bytes = 0;  // file data parsed, kept or dropped
  uint64_t written_entries = 0;
  uint64_t written_bytes = 0;
  // lib/modules/<kernel>/build and /source links pointing outside the image, not written.
  uint64_t dropped_links = 0;
  // The most paths (and bytes of them) one layer's writer held at once, for the caps above.
  uint64_t tracked_paths = 0;
  uint64_t tracked_path_bytes = 0;
};

}  // namespace kmodd::image
