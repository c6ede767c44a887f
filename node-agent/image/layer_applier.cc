#include "node-agent/image/layer_applier.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/beneath.h"
#include "common/file.h"
#include "common/oci/layer_path.h"
#include "node-agent/image/layer_writer.h"
#include "common/oci/tar_reader.h"

namespace kmodd::image {
namespace {

constexpr std::string_view kStagingMarker = ".partial-";

}  // namespace

namespace internal {

struct ApplierState {
  std::string final_path, final_name, staging_name, staging_path;
  Fd parent, root;
  Limits limits;
  KeepFilter filter;
  ApplyStats stats;
  bool durable = true;
  bool layer_open = false;
  bool done = false;  // committed or aborted
  absl::Status failure;

  // Records the first failure and removes the staging directory.
  absl::Status Fail(absl::Status s) {
    if (failure.ok()) {
      failure = s;
    }
    Cleanup();
    return s;
  }
  void Cleanup() {
    if (!root.valid()) {
      return;
    }
    root = Fd();
    (void)RemoveBeneath(parent, staging_name, staging_path);  // best effort: nothing to add
  }
};

}  // namespace internal

namespace {

class Sink final : public LayerSink {
 public:
  Sink(std::shared_ptr<internal::ApplierState> state, std::string digest, Compression compression)
      : state_(std::move(state)),
        digest_(std::move(digest)),
        decompressor_(NewDecompressor(compression)),
        compressed_(compression != Compression::kNone),
        writer_(state_->root, state_->filter, state_->limits, state_->stats),
        tar_(writer_) {}

  ~Sink() override {
    if (!finished_) {
      state_->layer_open = false;
      if (!state_->done) {
        (void)Fail(absl::FailedPreconditionError("abandoned before Finish"));
      }
    }
  }

  absl::Status Write(const char* data, size_t n) override {
    if (absl::Status s = Usable(); !s.ok()) {
      return s;
    }
    absl::Status s =
        decompressor_->Feed(data, n, [this](const char* d, size_t k) { return Consume(d, k); });
    return s.ok() ? s : Fail(s);
  }

  absl::Status Finish() override {
    if (absl::Status s = Usable(); !s.ok()) {
      return s;
    }
    absl::Status s =
        decompressor_->Finish([this](const char* d, size_t k) { return Consume(d, k); });
    if (s.ok()) {
      s = tar_.Finish();
    }
    finished_ = true;
    state_->layer_open = false;
    if (!s.ok()) {
      return Fail(s);
    }
    ++state_->stats.layers;
    return absl::OkStatus();
  }

 private:
  absl::Status Usable() const {
    if (finished_) {
      return absl::FailedPreconditionError(absl::StrCat("layer ", digest_, ": already finished"));
    }
    if (!state_->failure.ok()) {
      return state_->failure;
    }
    if (state_->done) {
      return absl::FailedPreconditionError(absl::StrCat("layer ", digest_, ": applier is closed"));
    }
    return absl::OkStatus();
  }

  absl::Status Consume(const char* data, size_t n) {
    decompressed_ += n;
    const Limits& l = state_->limits;
    const uint64_t in = std::max<uint64_t>(decompressor_->bytes_in(), 1);
    if (compressed_ && l.max_ratio > 0 && decompressed_ > l.ratio_grace_bytes &&
        decompressed_ / in >= l.max_ratio) {
      return absl::InvalidArgumentError(absl::StrCat(
          "decompression ratio reached ", l.max_ratio, ":1 (", decompressed_, " bytes from ",
          decompressor_->bytes_in(), " compressed): a decompression bomb"));
    }
    return tar_.Feed(data, n);
  }

  // Adds the layer, and for stream-level errors the entry they happened in or after.
  absl::Status Fail(const absl::Status& s) {
    std::string msg(s.message());
    if (!absl::StartsWith(msg, "entry \"") && !absl::StartsWith(msg, "layer ")) {
      if (!tar_.current_path().empty()) {
        msg = absl::StrCat(tar_.in_entry_data() ? "entry \"" : "after entry \"",
                           tar_.current_path(), "\": ", msg);
      }
    }
    if (!absl::StartsWith(msg, "layer ")) {
      msg = absl::StrCat("layer ", digest_, ": ", msg);
    }
    return state_->Fail(absl::Status(s.code(), msg));
  }

  std::shared_ptr<internal::ApplierState> state_;
  std::string digest_;
  std::unique_ptr<Decompressor> decompressor_;
  bool compressed_;
  LayerWriter writer_;
  TarReader tar_;
  uint64_t decompressed_ = 0;
  bool finished_ = false;
};

}  // namespace

absl::StatusOr<LayerApplier> LayerApplier::Begin(std::string final_dir, Limits limits,
                                                 const std::vector<std::string>& keep_prefixes,
                                                 bool durable) {
  while (final_dir.size() > 1 && final_dir.back() == '/') {
    final_dir.pop_back();
  }
  const std::filesystem::path final_path(final_dir);
  const std::string name = final_path.filename().string();
  if (name.empty() || name == "." || name == ".." || name == "/") {
    return absl::InvalidArgumentError(
        absl::StrCat("destination \"", final_dir, "\" does not name a directory"));
  }
  const std::string parent =
      final_path.has_parent_path() ? final_path.parent_path().string() : std::string(".");
  absl::StatusOr<KeepFilter> filter = KeepFilter::Make(keep_prefixes);
  if (!filter.ok()) {
    return filter.status();
  }
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return ErrnoStatus(ec.value(), "create directory", parent);
  }
  auto state = std::make_shared<internal::ApplierState>();
  absl::StatusOr<Fd> parent_fd = OpenRoot(parent);
  if (!parent_fd.ok()) {
    return parent_fd.status();
  }
  state->parent = *std::move(parent_fd);
  struct stat st {};
  if (fstatat(state->parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(final_dir, ": already exists"));
  }
  std::string staging = absl::StrCat(parent, "/.", name, std::string(kStagingMarker), "XXXXXX");
  if (mkdtemp(staging.data()) == nullptr) {
    return ErrnoStatus(errno, "create staging directory", staging);
  }
  state->staging_path = staging;
  state->staging_name = std::filesystem::path(staging).filename().string();
  state->final_name = name;
  state->final_path = final_dir;
  const int root = openat(state->parent.get(), state->staging_name.c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) {
    const absl::Status s = ErrnoStatus(errno, "open staging directory", staging);
    rmdir(staging.c_str());
    return s;
  }
  state->root = Fd(root);
  state->limits = limits;
  state->filter = *std::move(filter);
  state->durable = durable;
  return LayerApplier(std::move(state));
}

LayerApplier::LayerApplier(std::shared_ptr<internal::ApplierState> state)
    : state_(std::move(state)) {}
LayerApplier::LayerApplier(LayerApplier&&) noexcept = default;
LayerApplier& LayerApplier::operator=(LayerApplier&& other) noexcept {
  if (this != &other) {
    Abort();
    state_ = std::move(other.state_);
  }
  return *this;
}
LayerApplier::~LayerApplier() { Abort(); }

absl::StatusOr<std::unique_ptr<LayerSink>> LayerApplier::StartLayer(std::string digest,
                                                                    Compression compression) {
  if (!state_->failure.ok()) {
    return state_->failure;
  }
  if (state_->done) {
    return absl::FailedPreconditionError("layer applier is already committed or aborted");
  }
  if (state_->layer_open) {
    return absl::FailedPreconditionError(
        absl::StrCat("layer ", digest, ": the previous layer is not finished"));
  }
  state_->layer_open = true;
  return std::unique_ptr<LayerSink>(std::make_unique<Sink>(state_, std::move(digest), compression));
}

absl::Status LayerApplier::Commit() {
  internal::ApplierState& s = *state_;
  if (!s.failure.ok()) {
    return s.failure;
  }
  if (s.done) {
    return absl::FailedPreconditionError("layer applier is already committed or aborted");
  }
  if (s.layer_open) {
    return s.Fail(absl::FailedPreconditionError("commit with a layer still open"));
  }
  if (fchmod(s.root.get(), 0755) != 0) {
    return s.Fail(ErrnoStatus(errno, "chmod", s.staging_path));
  }
  if (s.durable && syncfs(s.root.get()) != 0) {
    return s.Fail(ErrnoStatus(errno, "syncfs", s.staging_path));
  }
  int rc = renameat2(s.parent.get(), s.staging_name.c_str(), s.parent.get(), s.final_name.c_str(),
                     RENAME_NOREPLACE);
  if (rc != 0 && errno == EINVAL) {
    // A file system without RENAME_NOREPLACE: check, then rename (kmodd owns the parent).
    struct stat st {};
    if (fstatat(s.parent.get(), s.final_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      errno = EEXIST;
    } else {
      rc = renameat(s.parent.get(), s.staging_name.c_str(), s.parent.get(), s.final_name.c_str());
    }
  }
  if (rc != 0) {
    return s.Fail(ErrnoStatus(errno, "rename staging directory into place", s.final_path));
  }
  if (s.durable) {
    fsync(s.parent.get());  // best effort: the rename is already visible
  }
  s.root = Fd();
  s.done = true;
  return absl::OkStatus();
}

void LayerApplier::Abort() {
  if (state_ == nullptr || state_->done) {
    return;
  }
  state_->Cleanup();
  state_->done = true;
  if (state_->failure.ok()) {
    state_->failure = absl::AbortedError("layer applier aborted");
  }
}

const ApplyStats& LayerApplier::stats() const { return state_->stats; }
const std::string& LayerApplier::staging_dir() const { return state_->staging_path; }

bool IsStagingDirName(std::string_view name) {
  const size_t at = name.rfind(kStagingMarker);
  return !name.empty() && name[0] == '.' && at != std::string_view::npos && at > 1 &&
         name.size() == at + kStagingMarker.size() + 6;
}

}  // namespace kmodd::image
