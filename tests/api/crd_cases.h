#pragma once

// The documents of tests/api/data/crd_cases.yaml, each with the field paths its
// refusal must name: one table for the decoder, the webhook, the standalone controller's
// module files, `validate` and the real API server (see the file's header).

#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file.h"
#include "tests/source_dir.h"

namespace kmodd::testing {

struct CrdCase {
  std::string name;         // metadata.name
  std::string description;  // test.kmodd.io/case
  std::set<std::string> refused_at;
  YAML::Node doc;
  std::string text;  // the document alone, to be decoded on its own
};

inline std::vector<CrdCase> LoadCrdCases() {
  const std::string path =
      std::string(KMODD_SOURCE_DIR) + "/tests/api/data/crd_cases.yaml";
  auto text = ReadFile(path);
  if (!text.ok()) {
    throw std::runtime_error(std::string(text.status().message()));
  }
  std::vector<CrdCase> cases;
  // Split on the separators rather than re-emitted, so that each document keeps its quoting.
  for (absl::string_view part : absl::StrSplit(*text, "\n---\n")) {
    CrdCase c;
    c.text = std::string(part) + "\n";
    const YAML::Node doc = YAML::Load(c.text);
    const YAML::Node meta = doc["metadata"];
    c.name = meta["name"].as<std::string>();
    c.description = meta["annotations"]["test.kmodd.io/case"].as<std::string>();
    for (absl::string_view p : absl::StrSplit(
             meta["annotations"]["test.kmodd.io/refused-at"].as<std::string>(), ',',
             absl::SkipWhitespace())) {
      c.refused_at.emplace(absl::StripAsciiWhitespace(p));
    }
    c.doc = doc;
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace kmodd::testing
