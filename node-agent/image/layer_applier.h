#pragma once

// Applies an image's layers, in order, into a directory, streaming: the registry client
// writes each blob's bytes into a LayerSink as they arrive (while it verifies the digest),
// and they are decompressed, parsed and written on the spot. Only the kept subtrees are
// written (for the agent: `<dirName>/lib/modules/<kernel>/` and the firmware path); the
// rest is parsed, counted against the limits and dropped. Safety rules: layer_writer.h.
//
// All or nothing: layers go into a staging directory next to the final one
// ("<parent>/.<name>.partial-XXXXXX"), which Commit renames into place once every layer has
// applied. Any error, Abort, or destroying the applier uncommitted removes the staging
// directory; after kill -9 one may remain, and IsStagingDirName lets the cache's garbage
// collector recognise it.
//
// Errors name the layer digest, the entry (as in the archive) and the rule broken:
//   layer sha256:ab..: entry "opt/../../etc/passwd": path has a '..' component
// A hostile or malformed image is InvalidArgument (terminal: retrying cannot help); I/O
// failures carry the errno's code (ResourceExhausted for a full disk, ...).
//
// Not thread-safe; one layer at a time (layers must apply in order anyway). Blocking file
// I/O: run it on a worker, never on the event loop.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/oci/decompressor.h"
#include "node-agent/image/layer_limits.h"

namespace kmodd::image {

namespace internal {
struct ApplierState;
}  // namespace internal

class LayerSink {
 public:
  // Destroying a sink before Finish fails the whole image: the tree is half a layer.
  virtual ~LayerSink() = default;
  // The next bytes of the blob, any size. After an error, every call returns it again.
  [[nodiscard]] virtual absl::Status Write(const char* data, size_t n) = 0;
  // The blob is complete: an error if the compressed stream or the tar stream is not.
  [[nodiscard]] virtual absl::Status Finish() = 0;
};

class LayerApplier {
 public:
  // Prepares the staging directory. `final_dir` must not exist yet (AlreadyExists);
  // its parent is created if missing. `keep_prefixes` are paths in the image
  // ("opt/lib/modules/6.1.0-18-amd64/", "firmware/"; "" keeps everything); an empty list
  // keeps nothing. `durable` flushes the tree to disk before the rename (syncfs), so that
  // a power cut never leaves a committed tree with missing data.
  [[nodiscard]] static absl::StatusOr<LayerApplier> Begin(std::string final_dir, Limits limits,
                                                          const std::vector<std::string>& keep_prefixes,
                                                          bool durable = true);

  LayerApplier(LayerApplier&&) noexcept;
  LayerApplier& operator=(LayerApplier&&) noexcept;
  ~LayerApplier();  // aborts unless committed

  // The next layer; the previous one must be finished. `digest` is used in messages only:
  // verifying it is the registry client's job.
  [[nodiscard]] absl::StatusOr<std::unique_ptr<LayerSink>> StartLayer(std::string digest,
                                                                      Compression compression);
  // Renames the staging directory to final_dir (mode 0755). Fails, and removes the staging
  // directory, after any earlier error or if final_dir appeared meanwhile (AlreadyExists).
  [[nodiscard]] absl::Status Commit();
  // Removes the staging directory. Idempotent; the applier accepts nothing more.
  void Abort();

  const ApplyStats& stats() const;
  // The staging directory's path (tests look inside it).
  const std::string& staging_dir() const;

 private:
  explicit LayerApplier(std::shared_ptr<internal::ApplierState> state);
  std::shared_ptr<internal::ApplierState> state_;  // shared with open sinks, which may outlive us
};

// Whether `name` (a file name, not a path) is a staging directory LayerApplier made.
bool IsStagingDirName(std::string_view name);

}  // namespace kmodd::image
