#include "firmware/ledger.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/value.h"
#include "firmware/files.h"

namespace kmodd::firmware {
namespace {

constexpr int64_t kVersion = 1;

Value IdentityFields(Value v, const Identity& id) {
  v.Set("size", static_cast<int64_t>(id.size));
  v.Set("digest", id.digest);
  return v;
}

// Thrown inside the parser only, for the one catch in ParseLedger to turn into a Status.
struct Corrupt {
  std::string why;
};

YAML::Node Field(const YAML::Node& map, const char* key, YAML::NodeType::value type) {
  const YAML::Node n = map[key];
  if (!n.IsDefined() || n.Type() != type) {
    throw Corrupt{absl::StrCat("\"", key, "\" is missing or has the wrong type")};
  }
  return n;
}

std::string String(const YAML::Node& map, const char* key) {
  return Field(map, key, YAML::NodeType::Scalar).as<std::string>();
}

std::string Path(const YAML::Node& map, const char* key) {
  std::string p = String(map, key);
  if (absl::Status s = CheckRelativePath(p); !s.ok()) {
    throw Corrupt{std::string(s.message())};
  }
  return p;
}

Identity ParseIdentity(const YAML::Node& map) {
  Identity id;
  id.size = Field(map, "size", YAML::NodeType::Scalar).as<uint64_t>();
  id.digest = String(map, "digest");
  const std::string prefix = ContentHasher::kDigestPrefix;
  bool hex = id.digest.size() == prefix.size() + 16 && absl::StartsWith(id.digest, prefix);
  for (size_t i = prefix.size(); hex && i < id.digest.size(); ++i) {
    const char c = id.digest[i];
    hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (!hex) {
    throw Corrupt{absl::StrCat("bad digest \"", id.digest, "\"")};
  }
  return id;
}

Ledger Parse(const YAML::Node& root) {
  if (!root.IsMap()) {
    throw Corrupt{"not a JSON object"};
  }
  if (Field(root, "version", YAML::NodeType::Scalar).as<int64_t>() != kVersion) {
    throw Corrupt{absl::StrCat("unsupported version (this kmodd reads version ", kVersion, ")")};
  }
  Ledger ledger;
  ledger.firmware_dir = String(root, "firmwareDir");
  if (root["savedClassPath"].IsDefined()) {
    ledger.saved_class_path = String(root, "savedClassPath");
  }
  for (const YAML::Node& f : Field(root, "files", YAML::NodeType::Sequence)) {
    LedgerEntry entry;
    const std::string path = Path(f, "path");
    entry.identity = ParseIdentity(f);
    entry.foreign = Field(f, "foreign", YAML::NodeType::Scalar).as<bool>();
    for (const YAML::Node& o : Field(f, "owners", YAML::NodeType::Sequence)) {
      const std::string owner = o.as<std::string>();
      if (absl::Status s = CheckOwner(owner); !s.ok()) {
        throw Corrupt{absl::StrCat(path, ": ", s.message())};
      }
      entry.owners.insert(owner);
    }
    if (entry.owners.empty()) {
      throw Corrupt{absl::StrCat(path, ": no owners")};
    }
    if (!ledger.files.emplace(path, std::move(entry)).second) {
      throw Corrupt{absl::StrCat(path, ": listed twice")};
    }
  }
  for (const YAML::Node& d : Field(root, "createdDirs", YAML::NodeType::Sequence)) {
    const std::string dir = d.as<std::string>();
    if (absl::Status s = CheckRelativePath(dir); !s.ok()) {
      throw Corrupt{std::string(s.message())};
    }
    ledger.created_dirs.insert(dir);
  }
  for (const YAML::Node& p : Field(root, "pending", YAML::NodeType::Sequence)) {
    ledger.pending.push_back(PendingFile{Path(p, "path"), ParseIdentity(p)});
  }
  return ledger;
}

}  // namespace

absl::Status CheckOwner(std::string_view owner) {
  if (owner.empty()) {
    return absl::InvalidArgumentError("empty firmware owner");
  }
  for (const char c : owner) {
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(
          absl::StrCat("firmware owner \"", std::string(owner), "\": not printable ASCII"));
    }
  }
  return absl::OkStatus();
}

std::string LedgerToJson(const Ledger& ledger) {
  Value root = Value::EmptyMap();
  root.Set("version", kVersion);
  root.Set("firmwareDir", ledger.firmware_dir);
  if (ledger.saved_class_path) {
    root.Set("savedClassPath", *ledger.saved_class_path);
  }
  Value files = Value::EmptyList();
  for (const auto& [path, entry] : ledger.files) {
    Value f = Value::EmptyMap();
    f.Set("path", path);
    f = IdentityFields(std::move(f), entry.identity);
    Value owners = Value::EmptyList();
    for (const std::string& o : entry.owners) {
      owners.Append(o);
    }
    f.Set("owners", std::move(owners));
    f.Set("foreign", entry.foreign);
    files.Append(std::move(f));
  }
  root.Set("files", std::move(files));
  Value dirs = Value::EmptyList();
  for (const std::string& d : ledger.created_dirs) {
    dirs.Append(d);
  }
  root.Set("createdDirs", std::move(dirs));
  Value pending = Value::EmptyList();
  for (const PendingFile& p : ledger.pending) {
    Value v = Value::EmptyMap();
    v.Set("path", p.path);
    pending.Append(IdentityFields(std::move(v), p.identity));
  }
  root.Set("pending", std::move(pending));
  return ToJson(root) + "\n";
}

absl::StatusOr<Ledger> ParseLedger(std::string_view text, const std::string& file) {
  auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(absl::StrCat(
        file, ": corrupt firmware ledger (", std::string(why),
        "); kmodd will not guess which firmware files it owns: repair or remove it by hand"));
  };
  try {
    return Parse(YAML::Load(std::string(text)));
  } catch (const Corrupt& e) {
    return corrupt(e.why);
  } catch (const YAML::Exception& e) {
    return corrupt(e.what());
  }
}

}  // namespace kmodd::firmware
