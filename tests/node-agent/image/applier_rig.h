#pragma once

// A one-call image apply for the layer applier tests.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "node-agent/image/layer_applier.h"

namespace kmodd::image::testing {

struct Layer {
  std::string digest;
  Compression compression;
  std::string bytes;
};

// Applies `layers` into `final_dir` feeding `chunk` bytes at a time, then commits. The first
// error, from wherever it came.
inline absl::Status ApplyImage(const std::string& final_dir, const std::vector<Layer>& layers,
                               const std::vector<std::string>& keep, Limits limits = {},
                               size_t chunk = 4096) {
  absl::StatusOr<LayerApplier> applier =
      LayerApplier::Begin(final_dir, limits, keep, /*durable=*/false);
  if (!applier.ok()) {
    return applier.status();
  }
  for (const Layer& layer : layers) {
    absl::StatusOr<std::unique_ptr<LayerSink>> sink =
        applier->StartLayer(layer.digest, layer.compression);
    if (!sink.ok()) {
      return sink.status();
    }
    for (size_t at = 0; at < layer.bytes.size(); at += chunk) {
      const size_t n = std::min(chunk, layer.bytes.size() - at);
      if (absl::Status s = (*sink)->Write(layer.bytes.data() + at, n); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = (*sink)->Finish(); !s.ok()) {
      return s;
    }
  }
  return applier->Commit();
}

// Everything beneath `dir`, relative and sorted: directories end in "/", symlinks show
// their target. What a test expects to find, and where leftovers would show.
inline std::vector<std::string> Tree(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    return out;
  }
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    std::string rel = e.path().lexically_relative(dir).generic_string();
    if (e.is_symlink()) {
      rel += " -> " + std::filesystem::read_symlink(e.path()).string();
    } else if (e.is_directory()) {
      rel += "/";
    }
    out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline unsigned Mode(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    return 0;
  }
  return st.st_mode & 07777;
}

}  // namespace kmodd::image::testing
