// Stager::Stage: list the image's firmware, plan against the ledger and what is on disk, then
// write in the order described at the top of stager.cc.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file.h"
#include "firmware/stager.h"

namespace kmodd::firmware {
namespace {

namespace fs = std::filesystem;

const char* KindOf(const fs::file_status& st) {
  switch (st.type()) {
    case fs::file_type::symlink:
      return "symbolic link";
    case fs::file_type::block:
      return "block device";
    case fs::file_type::character:
      return "character device";
    case fs::file_type::fifo:
      return "FIFO";
    case fs::file_type::socket:
      return "socket";
    default:
      return "special file";
  }
}

// The regular files under `source_dir`, relative to it, sorted. Anything but a regular file or
// a directory is an error naming it: firmware is plain files, and a symlink in an image could
// name anything on the host.
absl::StatusOr<std::vector<std::string>> ListSource(const std::string& source_dir) {
  struct stat root_st {};
  if (stat(source_dir.c_str(), &root_st) != 0) {
    return ErrnoStatus(errno, "cannot read firmware source", source_dir);
  }
  if (!S_ISDIR(root_st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_dir, ": firmware source is not a directory"));
  }
  const fs::path root(source_dir);
  std::vector<std::string> rels;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (ec) {
      break;
    }
    if (fs::is_directory(st)) {
      continue;  // not followed when it is a symlink: that is not a directory here
    }
    const std::string path = it->path().string();
    if (!fs::is_regular_file(st)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": is a ", KindOf(st), "; firmware must be regular files"));
    }
    std::string rel = it->path().lexically_relative(root).generic_string();
    if (absl::Status s = CheckRelativePath(rel); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": unusable firmware name: ", s.message()));
    }
    rels.push_back(std::move(rel));
  }
  if (ec) {
    return ErrnoStatus(ec.value(), "cannot list firmware source", source_dir);
  }
  std::sort(rels.begin(), rels.end());
  return rels;
}

struct Write {
  std::string rel;
  Identity identity;
  bool replaces = false;  // the owner's own file, changed by its new image
};

struct Plan {
  Ledger next;  // after the commit; `pending` holds every file written or released
  std::vector<Write> writes;
  std::set<std::string> new_dirs;
};

absl::Status Conflict(const std::string& rel, const std::string& owner, const LedgerEntry* entry,
                      const std::string& fw) {
  std::string holder;
  if (entry == nullptr) {
    holder = absl::StrCat("the file already in ", fw, ", which kmodd did not stage");
  } else {
    std::set<std::string> others = entry->owners;
    others.erase(owner);
    if (entry->foreign) {
      holder = absl::StrCat("the file that was in ", fw, " before kmodd");
      if (!others.empty()) {
        absl::StrAppend(&holder, " (shared by ", absl::StrJoin(others, ", "), ")");
      }
    } else if (others.empty()) {
      holder = absl::StrCat("the file staged for ", owner, ", which was changed outside kmodd");
    } else {
      holder = absl::StrCat("the file staged for ", absl::StrJoin(others, ", "));
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("firmware ", rel, ": the content from ", owner,
                                                    " differs from ", holder,
                                                    "; refusing to overwrite it"));
}

// Decides what staging `rel` for `owner` takes, into `plan`. Reads only.
absl::Status PlanFile(Plan& plan, const std::string& owner, const std::string& rel,
                      const Fd& src_root, const std::string& source_dir, const Fd& fw_root,
                      const std::string& fw) {
  const std::string src_display = JoinPath(source_dir, rel);
  const std::string dst_display = JoinPath(fw, rel);
  auto src = OpenRegularBeneath(src_root, source_dir, rel);
  if (!src.ok()) {
    return src.status();
  }
  if (!src->has_value()) {
    return absl::UnavailableError(absl::StrCat(src_display, ": vanished while being staged"));
  }
  auto src_id = ReadIdentity(**src, src_display);
  if (!src_id.ok()) {
    return src_id.status();
  }
  const auto [parent, base] = SplitParent(rel);
  auto probe = ProbeDir(fw_root, fw, parent);
  if (!probe.ok()) {
    return probe.status();
  }
  std::optional<Fd> dst;
  if (probe->dir) {
    auto opened = OpenRegular(*probe->dir, base, dst_display);
    if (!opened.ok()) {
      return opened.status();
    }
    dst = std::move(*opened);
  } else {
    plan.new_dirs.insert(probe->missing.begin(), probe->missing.end());
  }
  // Whether what is on disk is, byte for byte, what the image brings.
  auto on_disk_is_source = [&]() { return SameBytes(**src, *dst, dst_display); };

  bool write = false;
  bool replaces = false;
  auto it = plan.next.files.find(rel);
  if (it == plan.next.files.end()) {
    LedgerEntry entry{*src_id, {owner}, /*foreign=*/false};
    if (dst) {
      auto same = on_disk_is_source();
      if (!same.ok()) {
        return same.status();
      }
      if (!*same) {
        return Conflict(rel, owner, nullptr, fw);
      }
      entry.foreign = true;
    } else {
      write = true;
    }
    plan.next.files.emplace(rel, std::move(entry));
  } else {
    LedgerEntry& entry = it->second;
    const bool sole_owner = entry.owners.size() == 1 && entry.owners.count(owner) == 1;
    if (entry.foreign || !sole_owner) {
      // Others (or the host) have these bytes: they stay as they are.
      if (*src_id != entry.identity) {
        return Conflict(rel, owner, &entry, fw);
      }
      if (dst) {
        auto same = on_disk_is_source();
        if (!same.ok()) {
          return same.status();
        }
        if (!*same) {
          return Conflict(rel, owner, &entry, fw);
        }
      } else {
        write = true;  // deleted behind kmodd's back: the agreed content is written back
        entry.foreign = false;
      }
    } else {
      if (dst) {
        auto same = on_disk_is_source();
        if (!same.ok()) {
          return same.status();
        }
        if (!*same) {
          auto disk_id = ReadIdentity(*dst, dst_display);
          if (!disk_id.ok()) {
            return disk_id.status();
          }
          if (*disk_id != entry.identity) {
            return Conflict(rel, owner, &entry, fw);
          }
          write = replaces = true;
        }
      } else {
        write = true;
      }
      entry.identity = *src_id;
    }
    entry.owners.insert(owner);
  }
  if (write) {
    plan.writes.push_back(Write{rel, *src_id, replaces});
    plan.next.pending.push_back(PendingFile{rel, *src_id});
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> MakePlan(const Ledger& ledger, const std::string& owner,
                              const std::vector<std::string>& rels, const Fd& src_root,
                              const std::string& source_dir, const Fd& fw_root,
                              const std::string& fw) {
  Plan plan;
  plan.next = ledger;
  plan.next.pending.clear();
  for (const std::string& rel : rels) {
    if (absl::Status s = PlanFile(plan, owner, rel, src_root, source_dir, fw_root, fw); !s.ok()) {
      return s;
    }
  }
  // Stage replaces the owner's set: what its image no longer brings is released.
  const std::set<std::string> wanted(rels.begin(), rels.end());
  for (auto it = plan.next.files.begin(); it != plan.next.files.end();) {
    LedgerEntry& entry = it->second;
    if (wanted.count(it->first) == 0 && entry.owners.erase(owner) > 0 && entry.owners.empty()) {
      if (!entry.foreign) {
        plan.next.pending.push_back(PendingFile{it->first, entry.identity});
      }
      it = plan.next.files.erase(it);
    } else {
      ++it;
    }
  }
  plan.next.created_dirs.insert(plan.new_dirs.begin(), plan.new_dirs.end());
  return plan;
}

// Steps 3 and 4 at the top of stager.cc: every new content beside its target, then renamed.
absl::Status WriteFiles(const Plan& plan, const Fd& src_root, const std::string& source_dir,
                        const Fd& fw_root, const std::string& fw) {
  std::set<std::string> parents;
  for (const Write& w : plan.writes) {
    const auto [parent, base] = SplitParent(w.rel);
    const std::string src_display = JoinPath(source_dir, w.rel);
    auto dir = MakeDirs(fw_root, fw, parent);
    if (!dir.ok()) {
      return dir.status();
    }
    auto src = OpenRegularBeneath(src_root, source_dir, w.rel);
    if (!src.ok()) {
      return src.status();
    }
    if (!src->has_value()) {
      return absl::UnavailableError(absl::StrCat(src_display, ": vanished while being staged"));
    }
    const std::string tmp = NewName(base);
    auto written = CopyInto(**src, *dir, tmp, JoinPath(fw, JoinPath(parent, tmp)));
    if (!written.ok()) {
      return written.status();
    }
    if (*written != w.identity) {
      return absl::UnavailableError(absl::StrCat(src_display, ": changed while being staged"));
    }
    parents.insert(parent);
  }
  for (const Write& w : plan.writes) {
    const auto [parent, base] = SplitParent(w.rel);
    const std::string display = JoinPath(fw, w.rel);
    auto probe = ProbeDir(fw_root, fw, parent);
    if (!probe.ok()) {
      return probe.status();
    }
    if (!probe->dir) {
      return absl::UnavailableError(absl::StrCat(display, ": directory vanished while staging"));
    }
    const int dir = probe->dir->get();
    const std::string old_name = OldName(base);
    if (w.replaces) {
      if (unlinkat(dir, old_name.c_str(), 0) != 0 && errno != ENOENT) {
        return ErrnoStatus(errno, "cannot remove", JoinPath(fw, JoinPath(parent, old_name)));
      }
      if (linkat(dir, base.c_str(), dir, old_name.c_str(), 0) != 0 && errno != ENOENT) {
        return ErrnoStatus(errno, "cannot keep the previous content of", display);
      }
    }
    if (renameat(dir, NewName(base).c_str(), dir, base.c_str()) != 0) {
      return ErrnoStatus(errno, "cannot rename into place", display);
    }
  }
  for (const std::string& parent : parents) {
    auto probe = ProbeDir(fw_root, fw, parent);
    if (!probe.ok()) {
      return probe.status();
    }
    if (probe->dir) {
      if (absl::Status s = SyncDir(*probe->dir, JoinPath(fw, parent)); !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> Stager::Stage(const std::string& owner,
                                                       const std::string& source_dir) {
  const std::string& fw = options_.firmware_dir;
  if (absl::Status s = CheckOwner(owner); !s.ok()) {
    return s;
  }
  if (absl::Status s = Recover(); !s.ok()) {
    return s;
  }
  auto rels = ListSource(source_dir);
  if (!rels.ok()) {
    return rels.status();
  }
  auto src_root = OpenRoot(source_dir);
  if (!src_root.ok()) {
    return src_root.status();
  }
  auto fw_root = OpenFirmwareDir(/*create=*/true);
  if (!fw_root.ok()) {
    return fw_root.status();
  }
  auto plan = MakePlan(ledger_, owner, *rels, *src_root, source_dir, *fw_root, fw);
  if (!plan.ok()) {
    return plan.status();
  }
  if (!plan->writes.empty()) {
    Ledger intent = ledger_;
    for (const Write& w : plan->writes) {
      intent.pending.push_back(PendingFile{w.rel, w.identity});
    }
    intent.created_dirs.insert(plan->new_dirs.begin(), plan->new_dirs.end());
    if (absl::Status s = Save(std::move(intent)); !s.ok()) {
      return s;
    }
    absl::Status s = WriteFiles(*plan, *src_root, source_dir, *fw_root, fw);
    if (s.ok()) {
      s = Save(plan->next);
    }
    if (!s.ok()) {
      // The ledger still holds the intent: settling it undoes every file of this call. If
      // that fails too, the next call settles it first.
      static_cast<void>(Recover());
      return s;
    }
  } else if (absl::Status s = Save(plan->next); !s.ok()) {
    return s;
  }
  if (absl::Status s = Recover(); !s.ok()) {
    return s;
  }
  if (absl::Status s = SyncClassPath(); !s.ok()) {
    return s;
  }
  return *std::move(rels);
}

}  // namespace kmodd::firmware
