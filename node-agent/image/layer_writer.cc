#include "node-agent/image/layer_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd::image {
namespace {

mode_t FileMode(uint32_t mode) { return static_cast<mode_t>((mode & 0755) | 0600); }
mode_t DirMode(uint32_t mode) { return static_cast<mode_t>((mode & 0755) | 0700); }

std::string Octal(uint32_t mode) {
  char buf[16];
  snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode));
  return buf;
}

// chmod without following a symlink: `name` is opened as a directory with O_NOFOLLOW.
absl::Status ChmodDir(int at, const std::string& name, mode_t mode, const std::string& path) {
  const int fd = openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus(errno, "open directory", path);
  }
  const Fd dir(fd);
  if (fchmod(dir.get(), mode) != 0) {
    return ErrnoStatus(errno, "chmod", path);
  }
  return absl::OkStatus();
}

// The directory `rel` beneath the staging root, created (0755) where missing. Image content
// never redirects a write: a component that is a symlink or not a directory rejects the image.
absl::StatusOr<Fd> MakeDirsBeneath(const Fd& root, std::string_view rel) {
  absl::StatusOr<DirWalk> walk = WalkDirCreating(root, "", rel, 0755);
  if (!walk.ok()) {
    return walk.status();
  }
  switch (walk->end) {
    case DirWalk::kOpened:
      return std::move(walk->dir);
    case DirWalk::kSymlink:
      return absl::InvalidArgumentError(
          absl::StrCat(walk->at, ": is a symlink; refusing to write through it"));
    case DirWalk::kNotDirectory:
      return absl::InvalidArgumentError(absl::StrCat(walk->at, ": is not a directory"));
    case DirWalk::kAbsent:
      break;
  }
  return absl::UnavailableError(absl::StrCat(walk->at, ": vanished after being created"));
}

// The directory `rel` if every component is a real directory; nullopt otherwise (absent, a
// symlink or a file on the way): then nothing beneath it is this image's to act on.
absl::StatusOr<std::optional<Fd>> OpenDirIfPresent(const Fd& root, std::string_view rel) {
  absl::StatusOr<DirWalk> walk = WalkDir(root, "", rel);
  if (!walk.ok()) {
    return walk.status();
  }
  if (walk->end != DirWalk::kOpened) {
    return std::optional<Fd>();
  }
  return std::optional<Fd>(std::move(walk->dir));
}

}  // namespace

absl::Status LayerWriter::Reject(std::string_view rule) const {
  return absl::InvalidArgumentError(
      absl::StrCat("entry \"", entry_path_, "\": ", std::string(rule)));
}

absl::Status LayerWriter::Annotate(const absl::Status& s) const {
  return absl::Status(s.code(),
                      absl::StrCat("entry \"", entry_path_, "\": ", std::string(s.message())));
}

absl::Status LayerWriter::CheckLimits(const TarEntry& e) {
  if (++stats_.entries > limits_.max_entries) {
    return Reject(absl::StrCat("image has more than ", limits_.max_entries, " entries"));
  }
  if (e.path.size() > limits_.max_path_bytes || e.link.size() > limits_.max_path_bytes) {
    return Reject(
        absl::StrCat("path or link target longer than ", limits_.max_path_bytes, " bytes"));
  }
  if (e.size > limits_.max_file_bytes) {
    return Reject(absl::StrCat("file of ", e.size, " bytes exceeds the limit of ",
                               limits_.max_file_bytes, " bytes per file"));
  }
  if (e.size > limits_.max_total_bytes - std::min(stats_.data_bytes, limits_.max_total_bytes)) {
    return Reject(
        absl::StrCat("image data exceeds the limit of ", limits_.max_total_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status LayerWriter::OnEntry(const TarEntry& e) {
  entry_path_ = e.path;
  if (absl::Status s = CheckLimits(e); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> path = NormalizeEntryPath(e.path);
  if (!path.ok()) {
    return Annotate(path.status());
  }
  if (PathDepth(*path) > limits_.max_path_depth) {
    return Reject(absl::StrCat("path deeper than ", limits_.max_path_depth, " components"));
  }
  absl::StatusOr<Whiteout> w = ClassifyWhiteout(*path);
  if (!w.ok()) {
    return Annotate(w.status());
  }
  if (w->kind != Whiteout::kNone) {
    return ApplyWhiteout(*w);
  }
  if (path->empty()) {
    // "./": the root itself, which is the agent's and keeps its own mode.
    return e.type == TarType::kDirectory ? absl::OkStatus()
                                         : Reject("the image root is not a directory");
  }
  if (!filter_.Keeps(*path)) {
    if (filter_.Encloses(*path) && e.type != TarType::kDirectory && !touched_.Covers(*path)) {
      // A non-directory replaces a directory holding kept content: that content is gone.
      const auto [parent, name] = SplitParentView(*path);
      absl::StatusOr<std::optional<Fd>> dir = OpenDirIfPresent(root_, parent);
      if (!dir.ok()) {
        return Annotate(dir.status());
      }
      if (dir->has_value()) {
        return Remove(**dir, std::string(name), *path);
      }
    }
    return absl::OkStatus();  // dropped; the reader skips its data
  }
  return WriteEntry(e, *path);
}

absl::Status LayerWriter::ApplyWhiteout(const Whiteout& w) {
  if (w.kind == Whiteout::kIgnore || !(filter_.Keeps(w.target) || filter_.Encloses(w.target))) {
    return absl::OkStatus();
  }
  if (w.kind == Whiteout::kOpaque) {
    absl::StatusOr<std::optional<Fd>> dir = OpenDirIfPresent(root_, w.target);
    if (!dir.ok()) {
      return Annotate(dir.status());
    }
    if (!dir->has_value()) {
      return absl::OkStatus();
    }
    // Lower layers' content goes; what this layer already wrote beneath it stays.
    absl::Status s =
        PruneDir(**dir, w.target, [&](const std::string& p) { return touched_.Covers(p); });
    cached_dir_path_.clear();
    cached_dir_ = Fd();
    return s.ok() ? s : Annotate(s);
  }
  // A whiteout hides lower layers only: this layer's own entry of that name stays.
  if (touched_.Covers(w.target)) {
    return absl::OkStatus();
  }
  const auto [parent, name] = SplitParentView(w.target);
  absl::StatusOr<std::optional<Fd>> dir = OpenDirIfPresent(root_, parent);
  if (!dir.ok()) {
    return Annotate(dir.status());
  }
  return dir->has_value() ? Remove(**dir, std::string(name), w.target) : absl::OkStatus();
}

absl::Status LayerWriter::WriteEntry(const TarEntry& e, const std::string& path) {
  switch (e.type) {
    case TarType::kRegular:
    case TarType::kDirectory:
    case TarType::kSymlink:
    case TarType::kHardlink:
      break;
    default:
      return Reject(absl::StrCat(DescribeTarType(e.typeflag), " not allowed"));
  }
  if (e.type == TarType::kRegular && (e.mode & (S_ISUID | S_ISGID)) != 0) {
    return Reject(absl::StrCat("setuid/setgid file not allowed (mode ", Octal(e.mode), ")"));
  }
  if (e.type == TarType::kSymlink) {
    if (absl::Status s = CheckSymlinkTarget(path, e.link); !s.ok()) {
      if (IsKernelBuildLink(path)) {
        ++stats_.dropped_links;  // lib/modules/<kernel>/{build,source}: nothing we need
        return absl::OkStatus();
      }
      return Annotate(s);
    }
  }
  const auto [parent_view, name_view] = SplitParentView(path);
  const std::string parent(parent_view), name(name_view);
  absl::StatusOr<const Fd*> dir = ParentDir(parent);
  if (!dir.ok()) {
    return Annotate(dir.status());
  }
  absl::StatusOr<NodeKind> kind = KindOf(**dir, name, path);
  if (!kind.ok()) {
    return Annotate(kind.status());
  }
  if (absl::Status s = Touch(path); !s.ok()) {
    return s;
  }
  ++stats_.written_entries;
  if (e.type == TarType::kDirectory && *kind == NodeKind::kDirectory) {
    // An existing directory keeps its content; only the mode changes.
    absl::Status s = ChmodDir((*dir)->get(), name, DirMode(e.mode), path);
    return s.ok() ? s : Annotate(s);
  }
  if (*kind != NodeKind::kAbsent) {
    if (absl::Status s = Remove(**dir, name, path); !s.ok()) {
      return s;
    }
  }
  const int at = (*dir)->get();
  switch (e.type) {
    case TarType::kDirectory:
      if (mkdirat(at, name.c_str(), DirMode(e.mode)) != 0) {
        return Annotate(ErrnoStatus(errno, "mkdir", path));
      }
      if (absl::Status s = ChmodDir(at, name, DirMode(e.mode), path); !s.ok()) {  // umask
        return Annotate(s);
      }
      return absl::OkStatus();
    case TarType::kSymlink:
      if (symlinkat(e.link.c_str(), at, name.c_str()) != 0) {
        return Annotate(ErrnoStatus(errno, "symlink", path));
      }
      return absl::OkStatus();
    case TarType::kHardlink:
      return WriteHardlink(e, path, **dir, name);
    default:
      break;
  }
  const int fd =
      openat(at, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Annotate(ErrnoStatus(errno, "create", path));
  }
  file_ = Fd(fd);
  file_mode_ = FileMode(e.mode);
  return absl::OkStatus();
}

absl::Status LayerWriter::WriteHardlink(const TarEntry& e, const std::string& path, const Fd& dir,
                                        const std::string& name) {
  absl::StatusOr<std::string> target = NormalizeEntryPath(e.link);
  if (!target.ok()) {
    return Reject(
        absl::StrCat("hardlink target \"", e.link, "\": ", std::string(target.status().message())));
  }
  if (!filter_.Keeps(*target)) {
    return Reject(absl::StrCat("hardlink target \"", e.link, "\" is outside the extracted paths"));
  }
  const auto [tparent, tname] = SplitParentView(*target);
  absl::StatusOr<std::optional<Fd>> tdir = OpenDirIfPresent(root_, tparent);
  if (!tdir.ok()) {
    return Annotate(tdir.status());
  }
  absl::StatusOr<NodeKind> kind = tdir->has_value() ? KindOf(**tdir, std::string(tname), *target)
                                                    : absl::StatusOr<NodeKind>(NodeKind::kAbsent);
  if (!kind.ok()) {
    return Annotate(kind.status());
  }
  if (*kind != NodeKind::kRegular || *target == path) {
    return Reject(
        absl::StrCat("hardlink target \"", e.link, "\" is not a regular file extracted before it"));
  }
  // Flags 0: link the target itself, never what a symlink there would point to.
  if (linkat((*tdir)->get(), std::string(tname).c_str(), dir.get(), name.c_str(), 0) != 0) {
    return Annotate(ErrnoStatus(errno, "link", path));
  }
  return absl::OkStatus();
}

absl::Status LayerWriter::OnData(const char* data, size_t n) {
  stats_.data_bytes += n;
  if (!file_.valid()) {
    return absl::OkStatus();
  }
  stats_.written_bytes += n;
  absl::Status s = WriteAll(file_, data, n, entry_path_);
  return s.ok() ? s : Annotate(s);
}

absl::Status LayerWriter::OnEntryEnd() {
  if (!file_.valid()) {
    return absl::OkStatus();
  }
  if (fchmod(file_.get(), file_mode_) != 0) {
    return Annotate(ErrnoStatus(errno, "chmod", entry_path_));
  }
  absl::Status s = file_.Close(entry_path_);
  return s.ok() ? s : Annotate(s);
}

absl::StatusOr<const Fd*> LayerWriter::ParentDir(const std::string& rel) {
  if (!cached_dir_.valid() || cached_dir_path_ != rel) {
    absl::StatusOr<Fd> dir = MakeDirsBeneath(root_, rel);
    if (!dir.ok()) {
      return dir.status();
    }
    cached_dir_ = *std::move(dir);
    cached_dir_path_ = rel;
  }
  return &cached_dir_;
}

absl::Status LayerWriter::Remove(const Fd& dir, const std::string& name, const std::string& path) {
  // `dir` may be the cached directory itself: drop the cache only after using it.
  absl::Status s = RemoveBeneath(dir, name, path);
  if (IsBeneath(cached_dir_path_, path)) {
    cached_dir_path_.clear();
    cached_dir_ = Fd();
  }
  return s.ok() ? s : Annotate(s);
}

absl::Status LayerWriter::Touch(const std::string& path) {
  if (!touched_.Insert(path)) {
    return absl::OkStatus();
  }
  stats_.tracked_paths = std::max(stats_.tracked_paths, touched_.size());
  stats_.tracked_path_bytes = std::max(stats_.tracked_path_bytes, touched_.bytes());
  if (touched_.size() > limits_.max_layer_paths) {
    return Reject(absl::StrCat("more than ", limits_.max_layer_paths,
                               " extracted paths in one layer: refused to bound the agent's "
                               "memory"));
  }
  if (touched_.bytes() > limits_.max_layer_path_bytes) {
    return Reject(absl::StrCat("more than ", limits_.max_layer_path_bytes,
                               " bytes of extracted paths in one layer: refused to bound the "
                               "agent's memory"));
  }
  return absl::OkStatus();
}

bool TouchedPaths::Insert(const std::string& path) {
  if (!paths_.insert(path).second) {
    return false;
  }
  bytes_ += path.size();
  return true;
}

bool TouchedPaths::Covers(const std::string& path) const {
  if (path.empty()) {
    return !paths_.empty();
  }
  if (paths_.contains(path)) {
    return true;
  }
  const std::string dir = path + "/";
  const auto next = paths_.lower_bound(dir);
  return next != paths_.end() && next->compare(0, dir.size(), dir) == 0;
}

}  // namespace kmodd::image
