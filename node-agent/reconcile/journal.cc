#include "node-agent/reconcile/journal.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/json.h"
#include "common/value.h"
#include "node-agent/kernel/kernel.h"

namespace kmodd::reconcile {

namespace {

constexpr int kJournalVersion = 1;

Value List(const std::vector<std::string>& v) {
  Value l = Value::EmptyList();
  for (const auto& s : v) {
    l.Append(s);
  }
  return l;
}

// Reads the journal's fields, each absent or of its one type. The first field of another
// type is remembered (and later reads return empty values), so that decoding reads as a
// list of fields and is checked once at the end.
class FieldReader {
 public:
  explicit FieldReader(const std::string& source) : source_(source) {}

  std::string Str(const Value& map, std::string_view key, const std::string& where) {
    const Value* v = map.Find(key);
    if (v == nullptr || v->IsNull()) {
      return "";
    }
    if (!v->IsString()) {
      Fail(absl::StrCat(where, std::string(key), " is not a string"));
      return "";
    }
    return v->AsString();
  }

  std::vector<std::string> Strs(const Value& map, std::string_view key, const std::string& where) {
    std::vector<std::string> out;
    for (const Value& item : Items(map, key, where)) {
      if (!item.IsString()) {
        Fail(absl::StrCat(where, std::string(key), " holds a non-string"));
        return {};
      }
      out.push_back(item.AsString());
    }
    return out;
  }

  // The list at `key` (empty when absent or not a list, the latter remembered).
  const Value::List& Items(const Value& map, std::string_view key, const std::string& where) {
    static const Value::List kNone;
    const Value* v = map.Find(key);
    if (v == nullptr || v->IsNull()) {
      return kNone;
    }
    if (!v->IsList()) {
      Fail(absl::StrCat(where, std::string(key), " is not a list"));
      return kNone;
    }
    return v->AsList();
  }

  void Fail(const std::string& what) {
    if (error_.ok()) {
      error_ = absl::DataLossError(absl::StrCat(
          source_, ": corrupt journal: ", what, "; move it aside to start from the kernel's state"));
    }
  }
  const absl::Status& error() const { return error_; }

 private:
  const std::string& source_;
  absl::Status error_;
};

bool ParseJournalPhase(const std::string& s, api::Phase& p) {
  const std::optional<api::Phase> parsed = api::ParsePhase(s);
  if (!parsed || !IsJournalPhase(*parsed)) {
    return false;
  }
  p = *parsed;
  return true;
}

}  // namespace

bool IsJournalPhase(api::Phase p) {
  return p == api::Phase::kLoading || p == api::Phase::kLoaded || p == api::Phase::kUnloading ||
         p == api::Phase::kFailed;
}

std::string EncodeJournal(const Journal& j) {
  Value root = Value::EmptyMap();
  root.Set("version", kJournalVersion);
  root.Set("bootId", j.boot_id);
  Value modules = Value::EmptyMap();
  for (const auto& [key, e] : j.modules) {
    Value v = Value::EmptyMap();
    v.Set("fingerprint", e.fingerprint);
    v.Set("source", e.source);
    v.Set("tree", e.tree);
    v.Set("phase", api::PhaseName(e.phase));
    v.Set("loaded", List(e.loaded));
    v.Set("firmware", List(e.firmware));
    v.Set("message", e.message);
    modules.Set(key, std::move(v));
  }
  root.Set("modules", std::move(modules));
  Value removed = Value::EmptyList();
  for (const auto& r : j.in_tree_removed) {
    Value v = Value::EmptyMap();
    v.Set("module", r.module);
    v.Set("target", r.target);
    v.Set("removedFor", r.removed_for);
    removed.Append(std::move(v));
  }
  root.Set("inTreeRemoved", std::move(removed));
  return ToJson(root);
}

absl::StatusOr<Journal> DecodeJournal(const std::string& text, const std::string& source) {
  // The agent's own file, but a disk can corrupt it: the one strict JSON parser, every
  // field's type checked, an error naming the field instead of an exception.
  FieldReader read(source);
  absl::StatusOr<Value> parsed = ParseJson(text);
  if (!parsed.ok()) {
    read.Fail(std::string(parsed.status().message()));
    return read.error();
  }
  const Value& root = *parsed;
  const Value* version = root.IsMap() ? root.Find("version") : nullptr;
  if (version == nullptr || !version->IsInt() || version->AsInt() != kJournalVersion) {
    return absl::DataLossError(absl::StrCat(source, ": not a kmodd journal (version ",
                                            kJournalVersion, " expected)"));
  }
  Journal j;
  j.boot_id = read.Str(root, "bootId", "");
  const Value* modules = root.Find("modules");
  if (modules != nullptr && !modules->IsNull() && !modules->IsMap()) {
    read.Fail("modules is not an object");
  } else if (modules != nullptr && modules->IsMap()) {
    for (const auto& [key, v] : modules->AsMap()) {
      const std::string where = absl::StrCat("module ", key, ": ");
      if (!v.IsMap()) {
        read.Fail(absl::StrCat(where, "not an object"));
        break;
      }
      JournalEntry e;
      e.fingerprint = read.Str(v, "fingerprint", where);
      e.source = read.Str(v, "source", where);
      e.tree = read.Str(v, "tree", where);
      if (!ParseJournalPhase(read.Str(v, "phase", where), e.phase) && read.error().ok()) {
        return absl::DataLossError(absl::StrCat(source, ": module ", key, ": unknown phase"));
      }
      e.loaded = read.Strs(v, "loaded", where);
      e.firmware = read.Strs(v, "firmware", where);
      e.message = read.Str(v, "message", where);
      // Journals written before the node-level list kept the removals in each entry:
      // carry them over, or a restart after an upgrade would never reload them.
      for (const auto& name : read.Strs(v, "inTreeRemoved", where)) {
        AddRemoval(j, {kernel::CanonicalModuleName(name), kernel::CanonicalModuleName(name), key});
      }
      j.modules[key] = std::move(e);
    }
  }
  for (const Value& r : read.Items(root, "inTreeRemoved", "")) {
    if (!r.IsMap()) {
      read.Fail("inTreeRemoved holds a non-object");
      break;
    }
    AddRemoval(j, {read.Str(r, "module", "inTreeRemoved[]."), read.Str(r, "target", "inTreeRemoved[]."),
                   read.Str(r, "removedFor", "inTreeRemoved[].")});
  }
  if (!read.error().ok()) {
    return read.error();
  }
  return j;
}

absl::StatusOr<Journal> LoadJournal(const std::string& path) {
  auto text = ReadFile(path);
  if (absl::IsNotFound(text.status())) {
    return Journal{};
  }
  if (!text.ok()) {
    return text.status();
  }
  return DecodeJournal(*text, path);
}

absl::Status SaveJournal(const std::string& path, const Journal& j) {
  return WriteFileAtomic(path, EncodeJournal(j), 0600);
}

std::vector<std::string> InTreeRemovedFor(const Journal& j, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& r : j.in_tree_removed) {
    if (r.removed_for == key) {
      out.push_back(r.module);
    }
  }
  return out;
}

bool AddRemoval(Journal& j, InTreeRemoval r) {
  if (r.module.empty()) {
    return false;
  }
  for (const auto& have : j.in_tree_removed) {
    if (have.module == r.module) {
      return false;
    }
  }
  j.in_tree_removed.push_back(std::move(r));
  return true;
}

bool DropRemoval(Journal& j, const std::string& module) {
  auto& v = j.in_tree_removed;
  const auto before = v.size();
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const InTreeRemoval& r) { return r.module == module; }),
          v.end());
  return v.size() != before;
}

void ForgetBoot(Journal& j, const std::string& boot_id) {
  if (j.boot_id == boot_id) {
    return;
  }
  j.boot_id = boot_id;
  j.in_tree_removed.clear();
  for (auto& [key, e] : j.modules) {
    e.loaded.clear();
    if (e.phase != api::Phase::kUnloading) {
      e.phase = api::Phase::kLoading;
    }
  }
}

}  // namespace kmodd::reconcile
