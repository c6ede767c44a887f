#include "node-agent/reconcile/journal.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/file.h"
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

std::vector<std::string> Strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n.IsDefined() && n.IsSequence()) {
    for (const auto& item : n) {
      out.push_back(item.as<std::string>());
    }
  }
  return out;
}

bool ParsePhase(const std::string& s, Phase& p) {
  for (Phase candidate : {Phase::kLoading, Phase::kLoaded, Phase::kUnloading, Phase::kFailed}) {
    if (s == PhaseName(candidate)) {
      p = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kLoading:
      return "Loading";
    case Phase::kLoaded:
      return "Loaded";
    case Phase::kUnloading:
      return "Unloading";
    case Phase::kFailed:
      return "Failed";
  }
  return "Unknown";
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
    v.Set("phase", PhaseName(e.phase));
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
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap() || root["version"].as<int>(0) != kJournalVersion) {
      return absl::DataLossError(absl::StrCat(source, ": not a kmodd journal (version ",
                                              kJournalVersion, " expected)"));
    }
    Journal j;
    j.boot_id = root["bootId"].as<std::string>("");
    for (const auto& kv : root["modules"]) {
      JournalEntry e;
      const YAML::Node& v = kv.second;
      e.fingerprint = v["fingerprint"].as<std::string>("");
      e.source = v["source"].as<std::string>("");
      e.tree = v["tree"].as<std::string>("");
      if (!ParsePhase(v["phase"].as<std::string>(""), e.phase)) {
        return absl::DataLossError(
            absl::StrCat(source, ": module ", kv.first.as<std::string>(), ": unknown phase"));
      }
      e.loaded = Strings(v["loaded"]);
      e.firmware = Strings(v["firmware"]);
      e.message = v["message"].as<std::string>("");
      const std::string key = kv.first.as<std::string>();
      // Journals written before the node-level list kept the removals in each entry:
      // carry them over, or a restart after an upgrade would never reload them.
      for (const auto& name : Strings(v["inTreeRemoved"])) {
        AddRemoval(j, {kernel::CanonicalModuleName(name), kernel::CanonicalModuleName(name), key});
      }
      j.modules[key] = std::move(e);
    }
    const YAML::Node removed = root["inTreeRemoved"];
    for (const auto& r : removed.IsDefined() ? removed : YAML::Node(YAML::NodeType::Sequence)) {
      AddRemoval(j, {r["module"].as<std::string>(""), r["target"].as<std::string>(""),
                     r["removedFor"].as<std::string>("")});
    }
    return j;
  } catch (const YAML::Exception& e) {
    return absl::DataLossError(absl::StrCat(source, ": corrupt journal: ", e.what(),
                                            "; move it aside to start from the kernel's state"));
  }
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
    if (e.phase != Phase::kUnloading) {
      e.phase = Phase::kLoading;
    }
  }
}

}  // namespace kmodd::reconcile
