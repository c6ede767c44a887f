// Crash safety. The ledger is kmodd's only memory of firmware_dir, so every change is ordered
// such that, at any instant, what the ledger on disk *claims* (`files`) is fully written, and
// every file whose fate a crash could leave undecided is named in `pending` first:
//
//   Stage    1. plan: reads only; every conflict is found here, before anything is written
//            2. ledger := old claims + pending (each file to write, with its new identity)
//                        + the directories about to be created
//            3. new content to `.<name>.kmodd-new` beside each target, fsync'd
//            4. a file being replaced keeps its old content as `.<name>.kmodd-old` (a hard
//               link); every `.kmodd-new` is renamed into place; directories fsync'd
//            5. ledger := new claims + pending (files written or released)  <- commit point
//            6. Recover()
//   Release  1. ledger := claims without the owner + pending (files left with no owner)
//            2. Recover()
//
// Recover() settles each pending path by what is on disk: `.kmodd-new` is removed; a claimed
// file that is not its claimed content gets `.kmodd-old` back when that is (an update that
// never committed), and `.kmodd-old` is removed; an unclaimed file is deleted only when its
// content is the pending identity (so never a file someone else put there since). Then empty
// directories kmodd created are removed and `pending` is cleared. It runs on Open and before
// every Stage and Release, so a crash before the commit point undoes the Stage, a crash after
// it completes the Stage, and a crash in a Release completes the Release. A failed Stage
// after step 2 runs it at once, which is how "nothing of a failed Stage is left" is kept.

#include "firmware/stager.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd::firmware {
namespace {

absl::StatusOr<Ledger> LoadLedger(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return Ledger{};
    }
    return ErrnoStatus(errno, "cannot stat firmware ledger", path);
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return text.status();
  }
  return ParseLedger(*text, path);
}

// The identity of `name` in `dir`; nullopt when it is absent or not a regular file (then it
// is not kmodd's, whatever it is).
absl::StatusOr<std::optional<Identity>> IdentityAt(const Fd& dir, const std::string& name,
                                                   const std::string& display) {
  auto file = OpenRegular(dir, name, display);
  if (!file.ok()) {
    if (absl::IsFailedPrecondition(file.status())) {
      return std::optional<Identity>();
    }
    return file.status();
  }
  if (!file->has_value()) {
    return std::optional<Identity>();
  }
  auto id = ReadIdentity(**file, display);
  if (!id.ok()) {
    return id.status();
  }
  return std::optional<Identity>(*std::move(id));
}

// A directory under one of kmodd's names is not kmodd's: it is left alone (EISDIR).
absl::Status Unlink(const Fd& dir, const std::string& name, const std::string& display) {
  if (unlinkat(dir.get(), name.c_str(), 0) != 0 && errno != ENOENT && errno != EISDIR) {
    return ErrnoStatus(errno, "cannot remove", display);
  }
  return absl::OkStatus();
}

// One pending path of Recover() (see the top of this file).
absl::Status Settle(const Fd& root, const std::string& fw, const PendingFile& p, Ledger& ledger) {
  const auto [parent, base] = SplitParent(p.path);
  const std::string display = JoinPath(fw, p.path);
  auto probe = ProbeDir(root, fw, parent);
  if (!probe.ok()) {
    // A directory on the way became a symlink or a file: nothing there is kmodd's to touch.
    return absl::IsFailedPrecondition(probe.status()) ? absl::OkStatus() : probe.status();
  }
  if (!probe->dir) {
    return absl::OkStatus();
  }
  const Fd& dir = *probe->dir;
  const std::string new_name = NewName(base);
  const std::string old_name = OldName(base);
  if (absl::Status s = Unlink(dir, new_name, JoinPath(fw, JoinPath(parent, new_name))); !s.ok()) {
    return s;
  }
  auto current = IdentityAt(dir, base, display);
  auto backup = IdentityAt(dir, old_name, display);
  if (!current.ok()) {
    return current.status();
  }
  if (!backup.ok()) {
    return backup.status();
  }
  const auto claimed = ledger.files.find(p.path);
  if (claimed != ledger.files.end()) {
    const Identity& want = claimed->second.identity;
    if (*backup == want && *current != want) {
      if (renameat(dir.get(), old_name.c_str(), dir.get(), base.c_str()) != 0) {
        return ErrnoStatus(errno, "cannot restore previous content of", display);
      }
    } else if (backup->has_value()) {
      if (absl::Status s = Unlink(dir, old_name, display); !s.ok()) {
        return s;
      }
    }
  } else {
    if (backup->has_value()) {
      if (absl::Status s = Unlink(dir, old_name, display); !s.ok()) {
        return s;
      }
    }
    if (*current == p.identity) {
      if (absl::Status s = Unlink(dir, base, display); !s.ok()) {
        return s;
      }
    }
  }
  return SyncDir(dir, display);
}

// Removes the empty directories kmodd created, deepest first, and forgets those that are gone.
absl::Status PruneDirs(const Fd& root, const std::string& fw, std::set<std::string>& dirs) {
  const std::vector<std::string> deepest_first(dirs.rbegin(), dirs.rend());
  for (const std::string& d : deepest_first) {
    const auto [parent, base] = SplitParent(d);
    auto probe = ProbeDir(root, fw, parent);
    if (!probe.ok() && !absl::IsFailedPrecondition(probe.status())) {
      return probe.status();
    }
    if (!probe.ok() || !probe->dir) {
      dirs.erase(d);
      continue;
    }
    if (unlinkat(probe->dir->get(), base.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT ||
        errno == ENOTDIR) {
      dirs.erase(d);
    } else if (errno != ENOTEMPTY && errno != EEXIST) {
      return ErrnoStatus(errno, "cannot remove directory", JoinPath(fw, d));
    }
  }
  return absl::OkStatus();
}

// A string module parameter reads back with a newline; an empty one written as below reads
// back from a regular file (tests) as a NUL.
absl::StatusOr<std::string> ReadParam(const std::string& path) {
  absl::StatusOr<std::string> value = ReadFile(path);
  if (!value.ok()) {
    return value.status();
  }
  while (!value->empty() && (value->back() == '\n' || value->back() == '\0')) {
    value->pop_back();
  }
  return value;
}

// sysfs takes the value in one write() and drops an empty write without calling the
// parameter's setter, so an empty value is written as one NUL byte: the kernel terminates the
// buffer and param_set_copystring copies the empty C string. Not "\n": kernels that strip the
// newline (6.5 and later) then search "/<name>" at the filesystem root, older ones "\n/<name>".
// A set value is written without a newline, which older kernels would keep in the path.
absl::Status WriteParam(const std::string& path, const std::string& value) {
  const std::string text = value.empty() ? std::string(1, '\0') : value;
  Fd fd(open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd.valid()) {
    return ErrnoStatus(errno, "cannot open for writing", path);
  }
  const ssize_t n = write(fd.get(), text.data(), text.size());
  if (n < 0) {
    return ErrnoStatus(errno, "write", path);
  }
  if (static_cast<size_t>(n) != text.size()) {
    return absl::UnavailableError(absl::StrCat(path, ": short write"));
  }
  if (close(fd.release()) != 0) {
    return ErrnoStatus(errno, "close", path);
  }
  return absl::OkStatus();
}

}  // namespace

Stager::Stager(StagerOptions options, Fd lock, Ledger ledger)
    : options_(std::move(options)), lock_(std::move(lock)), ledger_(std::move(ledger)) {}

absl::StatusOr<Stager> Stager::Open(StagerOptions options) {
  std::string fw = options.firmware_dir;
  while (fw.size() > 1 && fw.back() == '/') {
    fw.pop_back();
  }
  if (fw.empty() || fw.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("firmware directory must be an absolute path, not \"", fw, "\""));
  }
  options.firmware_dir = fw;
  const std::string& ledger_path = options.ledger_path;
  if (ledger_path.empty()) {
    return absl::InvalidArgumentError("firmware ledger path is empty");
  }
  const std::filesystem::path ledger_dir = std::filesystem::path(ledger_path).parent_path();
  std::error_code ec;
  if (!ledger_dir.empty()) {
    std::filesystem::create_directories(ledger_dir, ec);
    if (ec) {
      return ErrnoStatus(ec.value(), "cannot create directory", ledger_dir.string());
    }
  }
  const std::string lock_path = ledger_path + ".lock";
  Fd lock(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock.valid()) {
    return ErrnoStatus(errno, "cannot open", lock_path);
  }
  if (flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::UnavailableError(
          absl::StrCat(lock_path, ": the firmware ledger is in use by another kmodd process"));
    }
    return ErrnoStatus(errno, "lock", lock_path);
  }
  absl::StatusOr<Ledger> ledger = LoadLedger(ledger_path);
  if (!ledger.ok()) {
    return ledger.status();
  }
  if (ledger->firmware_dir != fw) {
    // Its paths are relative to another directory: following them here would be wrong.
    if (!ledger->Empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          ledger_path, ": the firmware ledger is for ", ledger->firmware_dir,
          ", not the configured ", fw, "; release everything with the old setting first"));
    }
    ledger->firmware_dir = fw;
  }
  Stager stager(std::move(options), std::move(lock), *std::move(ledger));
  if (absl::Status s = stager.Recover(); !s.ok()) {
    return s;
  }
  return stager;
}

absl::Status Stager::Save(Ledger next) {
  if (next == ledger_) {
    return absl::OkStatus();
  }
  if (absl::Status s = WriteFileAtomic(options_.ledger_path, LedgerToJson(next), 0644); !s.ok()) {
    return s;
  }
  ledger_ = std::move(next);
  return absl::OkStatus();
}

absl::StatusOr<Fd> Stager::OpenFirmwareDir(bool create) const {
  const std::string& fw = options_.firmware_dir;
  if (create) {
    std::error_code ec;
    std::filesystem::create_directories(fw, ec);
    if (ec) {
      return ErrnoStatus(ec.value(), "cannot create directory", fw);
    }
  }
  return OpenRoot(fw);
}

absl::Status Stager::Recover() {
  if (ledger_.pending.empty()) {
    return absl::OkStatus();
  }
  Ledger next = ledger_;
  next.pending.clear();
  absl::StatusOr<Fd> root = OpenFirmwareDir(/*create=*/false);
  if (!root.ok()) {
    if (!absl::IsNotFound(root.status())) {
      return root.status();
    }
    next.created_dirs.clear();  // gone with firmware_dir, and all that was in them
    return Save(std::move(next));
  }
  for (const PendingFile& p : ledger_.pending) {
    if (absl::Status s = Settle(*root, options_.firmware_dir, p, next); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = PruneDirs(*root, options_.firmware_dir, next.created_dirs); !s.ok()) {
    return s;
  }
  return Save(std::move(next));
}

absl::Status Stager::Release(const std::string& owner) {
  if (absl::Status s = CheckOwner(owner); !s.ok()) {
    return s;
  }
  if (absl::Status s = Recover(); !s.ok()) {
    return s;
  }
  Ledger next = ledger_;
  for (auto it = next.files.begin(); it != next.files.end();) {
    LedgerEntry& entry = it->second;
    if (entry.owners.erase(owner) > 0 && entry.owners.empty()) {
      if (!entry.foreign) {
        next.pending.push_back(PendingFile{it->first, entry.identity});
      }
      it = next.files.erase(it);
    } else {
      ++it;
    }
  }
  // The ledger lets go of the files before they are deleted: see the top of this file.
  if (absl::Status s = Save(std::move(next)); !s.ok()) {
    return s;
  }
  if (absl::Status s = Recover(); !s.ok()) {
    return s;
  }
  return SyncClassPath();
}

// The value kmodd overwrites is recorded before it is overwritten, and forgotten only after
// it is restored, so a crash can neither lose it nor restore it twice. A reboot resets the
// parameter; the next Stage finds it differing and records the fresh value. The restore
// happens only while the parameter still names firmware_dir: if someone else has changed it
// since, theirs is the value to keep.
absl::Status Stager::SyncClassPath() {
  const std::string& param = options_.class_path_param;
  const std::string& fw = options_.firmware_dir;
  if (param.empty() || (!ledger_.HasOwners() && !ledger_.saved_class_path)) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> current = ReadParam(param);
  if (!current.ok()) {
    return current.status();
  }
  Ledger next = ledger_;
  if (ledger_.HasOwners()) {
    if (*current == fw) {
      if (!next.saved_class_path) {
        next.saved_class_path = fw;
      }
      return Save(std::move(next));
    }
    next.saved_class_path = *current;
    if (absl::Status s = Save(std::move(next)); !s.ok()) {
      return s;
    }
    return WriteParam(param, fw);
  }
  if (*current == fw && *ledger_.saved_class_path != fw) {
    if (absl::Status s = WriteParam(param, *ledger_.saved_class_path); !s.ok()) {
      return s;
    }
  }
  next.saved_class_path.reset();
  return Save(std::move(next));
}

std::vector<StagedFile> Stager::List() const {
  std::vector<StagedFile> out;
  out.reserve(ledger_.files.size());
  for (const auto& [path, entry] : ledger_.files) {
    out.push_back(StagedFile{path, entry.identity.size, entry.identity.digest,
                             std::vector<std::string>(entry.owners.begin(), entry.owners.end()),
                             entry.foreign});
  }
  return out;
}

}  // namespace kmodd::firmware
