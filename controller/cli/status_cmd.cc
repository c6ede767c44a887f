// `kmodd-controller status`: what the controller (standalone, or in Kubernetes mode with
// --status-file) last wrote to its status file, as a table for people or as the document
// itself for machines.

#include <algorithm>
#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/table.h"
#include "common/value.h"
#include "controller/cli/commands.h"
#include "controller/cli/output.h"
#include "controller/server/status.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller status [--status-file FILE] [-o table|yaml|json] [--nodes]\n";


bool IsFalse(const Value* v) { return v != nullptr && v->IsBool() && !v->AsBool(); }

const Value::List& ListOf(const Value& doc, const char* key) {
  static const Value::List kEmpty;  // NOLINT(cert-err58-cpp): cannot throw
  const Value* v = doc.Find(key);
  return v != nullptr && v->IsList() ? v->AsList() : kEmpty;
}

std::string ModulesTable(const Value& doc, bool per_node) {
  std::vector<std::vector<std::string>> rows;
  if (per_node) {
    rows.push_back({"NAMESPACE", "NAME", "NODE", "PHASE", "SINCE", "MESSAGE"});
  } else {
    rows.push_back({"NAMESPACE", "NAME", "MATCHING", "DESIRED", "AVAILABLE", "DEGRADED"});
  }
  for (const auto& m : ListOf(doc, "modules")) {
    const std::string ns = ScalarText(m.Find("namespace"));
    const std::string name = ScalarText(m.Find("name"));
    const Value* status = m.Find("status");
    if (status == nullptr) {
      continue;
    }
    if (per_node) {
      for (const auto& n : ListOf(*status, "nodes")) {
        std::string phase = ScalarText(n.Find("phase"));
        if (const Value* c = n.Find("connected"); c != nullptr && c->IsBool() && !c->AsBool()) {
          phase += " (disconnected)";
        }
        rows.push_back({ns, name, ScalarText(n.Find("node")), phase, ScalarText(n.Find("since")),
                        ScalarText(n.Find("message"))});
      }
      continue;
    }
    const Value* loader = status->Find("moduleLoader");
    std::string degraded = "False";
    for (const auto& c : ListOf(*status, "conditions")) {
      if (ScalarText(c.Find("type")) == "Degraded") {
        degraded = ScalarText(c.Find("status"));
      }
    }
    rows.push_back({ns, name,
                    ScalarText(loader ? loader->Find("nodesMatchingSelectorNumber") : nullptr),
                    ScalarText(loader ? loader->Find("desiredNumber") : nullptr),
                    ScalarText(loader ? loader->Find("availableNumber") : nullptr), degraded});
  }
  std::string out = RenderTable(rows);
  int connected = 0;
  int away = 0;
  for (const auto& n : ListOf(doc, "nodes")) {
    const Value* c = n.Find("connected");
    (c != nullptr && c->IsBool() && c->AsBool() ? connected : away) += 1;
  }
  absl::StrAppend(&out, "\nagents: ", connected, " connected, ", away, " disconnected (status at ",
                  ScalarText(doc.Find("generatedAt")), ")\n");
  if (IsFalse(doc.Find("active"))) {
    absl::StrAppend(&out, "this replica is not the leader: it serves no agents and writes "
                          "nothing; read the leader's status\n");
  }
  if (IsFalse(doc.Find("serving"))) {
    absl::StrAppend(&out, "no desired state sent yet: Modules were rejected before any were "
                          "accepted (fix or delete them); agents keep what they run\n");
  }
  const auto& errors = ListOf(doc, "errors");
  if (!errors.empty()) {
    absl::StrAppend(&out, "rejected (the Modules as last accepted stay in force):\n");
    for (const auto& e : errors) {
      std::string where = ScalarText(e.Find("file"));
      if (e.Find("line") != nullptr) {
        absl::StrAppend(&where, ":", ScalarText(e.Find("line")));
      }
      for (const char* part : {"object", "field", "message"}) {
        if (const std::string text = ScalarText(e.Find(part)); !text.empty()) {
          absl::StrAppend(&where, where.empty() ? "" : ": ", text);
        }
      }
      absl::StrAppend(&out, "  ", where, "\n");
    }
  }
  return out;
}

}  // namespace

int StatusCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string path = "/var/lib/kmodd/controller-status.yaml";
  std::string format = "table";
  bool per_node = false;
  flags::FlagSet flags("kmodd-controller status", kUsage);
  flags.String("--status-file", "FILE",
               "what `run` writes (default /var/lib/kmodd/controller-status.yaml;\n"
               "in Kubernetes mode only where `run` was given --status-file)",
               &path);
  flags.OneOf("-o,--output", "FORMAT",
              "table (default): one row per Module with KMM's moduleLoader counters;\n"
              "yaml and json print the whole status document",
              &format, {"table", "yaml", "json"});
  flags.Switch("--nodes", "table: one row per (Module, node) with its phase and message",
               &per_node);
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit;
  }
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    err << "error: " << text.status().message()
        << "\n(is `kmodd-controller run` running with this --status-file?)\n";
    return 1;
  }
  absl::StatusOr<Value> doc = server::ParseStatusDocument(*text);
  if (!doc.ok()) {
    err << "error: " << path << ": " << doc.status().message() << "\n";
    return 1;
  }
  if (format == "yaml") {
    out << ToYaml(*doc);
  } else if (format == "json") {
    out << ToJson(*doc);
  } else {
    out << ModulesTable(*doc, per_node);
  }
  return 0;
}

}  // namespace kmodd::cli
