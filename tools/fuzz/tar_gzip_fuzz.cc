// libFuzzer target: arbitrary bytes through the gzip decoder, the tar reader and the layer
// applier, into a temporary directory.
//
// Build (clang only) and run:
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DKMODD_FUZZ=ON -DKMODD_BUILD_TESTS=OFF
//   cmake --build build-fuzz --target tar_gzip_fuzz
//   mkdir -p /tmp/kmodd-fuzz-corpus
//   ./build-fuzz/bin/tar_gzip_fuzz -max_total_time=60 -rss_limit_mb=1024 /tmp/kmodd-fuzz-corpus
//
// It finds far more from seeds than from nothing (a tar header needs a valid checksum): any
// layer blob prefixed with a selector byte will do, e.g.
//   { printf '\001'; cat layer.tar.gz; } > /tmp/kmodd-fuzz-corpus/seed-gz
//   { printf '\002'; cat layer.tar; } > /tmp/kmodd-fuzz-corpus/seed-tar
//
// The first input byte is a selector: bit 0 picks gzip or an uncompressed tar (so the fuzzer
// reaches the tar reader without having to find valid deflate first), bit 1 picks the keep
// filter (everything, or a KMM layout), bits 2-7 the size of the writes. The rest is the blob.
//
// Besides ASan's checks, after each input: a committed tree holds only directories, regular
// files without setuid/setgid and symlinks that stay beneath it; a rejected one left nothing
// in the work directory.

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "node-agent/image/layer_applier.h"
#include "common/oci/layer_path.h"

namespace fs = std::filesystem;
using kmodd::image::Compression;
using kmodd::image::LayerApplier;
using kmodd::image::LayerSink;
using kmodd::image::Limits;

namespace {

const std::string& WorkDir() {
  static const std::string dir = [] {
    std::string tmpl = (fs::temp_directory_path() / "kmodd-fuzz-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      abort();
    }
    return tmpl;
  }();
  static const bool cleanup = [] { return atexit([] { fs::remove_all(WorkDir()); }) == 0; }();
  (void)cleanup;
  return dir;
}

void Violation(const std::string& what) {
  std::fprintf(stderr, "oracle violated: %s\n", what.c_str());
  abort();
}

void CheckTree(const std::string& root) {
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string rel = it->path().lexically_relative(root).generic_string();
    const fs::file_status st = it->symlink_status();
    if (fs::is_symlink(st)) {
      const std::string target = fs::read_symlink(it->path()).string();
      if (!kmodd::image::CheckSymlinkTarget(rel, target).ok()) {
        Violation("symlink " + rel + " -> " + target);
      }
    } else if (fs::is_regular_file(st)) {
      const fs::perms p = st.permissions();
      if ((p & (fs::perms::set_uid | fs::perms::set_gid | fs::perms::group_write |
                fs::perms::others_write)) != fs::perms::none) {
        Violation("mode of " + rel);
      }
    } else if (!fs::is_directory(st)) {
      Violation("special file " + rel);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const uint8_t selector = data[0];
  const char* blob = reinterpret_cast<const char*>(data + 1);
  const size_t n = size - 1;
  const Compression compression = (selector & 1) != 0 ? Compression::kGzip : Compression::kNone;
  const std::vector<std::string> keep =
      (selector & 2) != 0 ? std::vector<std::string>{""}
                          : std::vector<std::string>{"opt/lib/modules/k/", "firmware/"};
  const size_t chunk = 1 + (selector >> 2) * 61u;

  Limits limits;
  limits.max_total_bytes = 8 << 20;
  limits.max_file_bytes = 1 << 20;
  limits.max_entries = 2000;
  limits.ratio_grace_bytes = 1 << 20;

  const std::string tree = WorkDir() + "/tree";
  bool committed = false;
  {
    absl::StatusOr<LayerApplier> applier = LayerApplier::Begin(tree, limits, keep, false);
    if (!applier.ok()) {
      Violation(std::string(applier.status().message()));
    }
    absl::StatusOr<std::unique_ptr<LayerSink>> sink =
        applier->StartLayer("sha256:fuzz", compression);
    absl::Status s = sink.status();
    for (size_t at = 0; s.ok() && at < n; at += chunk) {
      s = (*sink)->Write(blob + at, std::min(chunk, n - at));
    }
    if (s.ok()) {
      s = (*sink)->Finish();
    }
    if (s.ok()) {
      s = applier->Commit();
      committed = s.ok();
    }
  }
  if (committed) {
    CheckTree(tree);
    fs::remove_all(tree);
  }
  if (!fs::is_empty(WorkDir())) {
    Violation("leftovers in " + WorkDir());
  }
  return 0;
}
