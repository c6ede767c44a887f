#include "tools/agentctl/module_file.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/decode.h"
#include "proto/convert.h"
#include "yaml-cpp/yaml.h"

namespace kmodd::agentctl {

namespace {

// The document a bare module entry becomes: the entry is indented under spec.modules as its
// one element, so that the controller's decoder reads it with its quoting and styles
// intact, and lines move by exactly this header's length.
constexpr char kWrapHeader[] =
    "apiVersion: kmm.sigs.x-k8s.io/v1beta1\n"
    "kind: NodeModulesConfig\n"
    "metadata: {name: agentctl}\n"
    "spec:\n"
    "  modules:\n"
    "    -\n";
constexpr int kWrapHeaderLines = 6;

// A bare module entry has no `kind`: wrap it (wrapped = true); anything else is decoded as
// it is.
absl::StatusOr<std::string> WrapBareEntry(std::string_view text, std::string_view source,
                                          bool& wrapped) {
  wrapped = false;
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    if (docs.size() != 1 || !docs[0].IsMap() || docs[0]["kind"]) {
      return std::string(text);
    }
  } catch (const YAML::Exception& ex) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ":", ex.mark.line + 1, ": ", ex.msg));
  }
  std::string out = kWrapHeader;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const std::string_view line = text.substr(start, end - start);
    // Document markers would end the wrapping document; blank them, keeping the line count.
    if (line != "---" && line != "...") {
      out += "      ";
      out += line;
    }
    out += '\n';
    start = end + 1;
  }
  wrapped = true;
  return out;
}

}  // namespace

absl::StatusOr<std::vector<v1::ModuleSpec>> ParseModuleFile(std::string_view text,
                                                            std::string_view source) {
  bool wrapped = false;
  absl::StatusOr<std::string> doc = WrapBareEntry(text, source, wrapped);
  if (!doc.ok()) {
    return doc.status();
  }
  api::Decoded d = api::DecodeDocuments(*doc, source);
  if (!d.errors.empty()) {
    std::vector<std::string> lines;
    for (auto e : d.errors) {
      if (wrapped && e.line > kWrapHeaderLines) {
        e.line -= kWrapHeaderLines;
      }
      lines.push_back(e.ToString());
    }
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  }
  std::vector<v1::ModuleSpec> out;
  for (const auto& c : d.node_modules_configs) {
    for (const auto& m : c.object.modules) {
      v1::ModuleSpec spec = proto::ToProto(m);
      // What the agent would refuse, refused here with the file's name.
      if (auto checked = proto::FromProto(spec); !checked.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": ", checked.status().message()));
      }
      out.push_back(std::move(spec));
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": no module entry (name, namespace, config) and no "
                             "NodeModulesConfig found"));
  }
  return out;
}

}  // namespace kmodd::agentctl
