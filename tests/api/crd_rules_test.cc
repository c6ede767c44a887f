#include <catch2/catch.hpp>

#include <set>
#include <string>

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include "common/file.h"
#include "api/crd_rules.h"
#include "api/decode.h"
#include "api/validate.h"
#include "tests/api/crd_cases.h"
#include "tests/source_dir.h"

using kmodd::api::DecodeDocuments;
using kmodd::api::Decoded;
using kmodd::api::ValidateModule;
using kmodd::testing::CrdCase;
using kmodd::testing::LoadCrdCases;

TEST_CASE("decoding refuses what the Module CRD refuses, at the same field paths") {
  for (const CrdCase& c : LoadCrdCases()) {
    DYNAMIC_SECTION(c.name << ": " << c.description) {
      const Decoded d = DecodeDocuments(c.text, c.name);
      std::set<std::string> paths;
      for (const auto& e : d.errors) {
        UNSCOPED_INFO(e.ToString());
        paths.insert(e.path);
      }
      CHECK(paths == c.refused_at);
      if (c.refused_at.empty()) {
        REQUIRE(d.modules.size() == 1);
        CHECK(ValidateModule(d.modules.front().object).empty());
        CHECK(d.warnings.empty());
      } else {
        CHECK(d.modules.empty());
      }
    }
  }
}

namespace {

using kmodd::api::CrdRule;
using Kind = CrdRule::Kind;

// "path kind value" for each rule, in a form both the table and the CRD's schema give.
std::string Describe(const std::string& path, const std::string& kind, const std::string& value) {
  return path + " " + kind + (value.empty() ? "" : " " + value);
}

std::set<std::string> TableRules() {
  const auto& rules = kmodd::api::CrdRules();
  REQUIRE(rules.status().ToString() == "OK");
  std::set<std::string> out;
  for (const CrdRule& r : *rules) {
    switch (r.kind) {
      case Kind::kRequired:
        out.insert(Describe(r.path, "required", ""));
        break;
      case Kind::kMinItems:
        out.insert(Describe(r.path, "minItems", std::to_string(r.items)));
        break;
      case Kind::kMaxItems:
        out.insert(Describe(r.path, "maxItems", std::to_string(r.items)));
        break;
      case Kind::kPattern:
        out.insert(Describe(r.path, "pattern", r.value));
        break;
      case Kind::kDefault:
        out.insert(Describe(r.path, "default", "'" + r.value + "'"));
        break;
      case Kind::kExclusive:
        out.insert(Describe(r.path, "exclusive", r.keys[0] + "," + r.keys[1] + " " + r.message));
        break;
    }
  }
  return out;
}

// Every rule in the schema under `node`: what the API server enforces.
void SchemaRules(const YAML::Node& node, const std::string& path, std::set<std::string>& out) {
  for (const auto& key : node["required"]) {
    out.insert(Describe(path + "." + key.as<std::string>(), "required", ""));
  }
  for (const char* kind : {"minItems", "maxItems", "pattern"}) {
    if (node[kind]) {
      out.insert(Describe(path, kind, node[kind].as<std::string>()));
    }
  }
  if (node["default"]) {
    out.insert(Describe(path, "default", "'" + node["default"].as<std::string>() + "'"));
  }
  static const RE2 kExclusive(R"(!\(has\(self\.(\w+)\) && has\(self\.(\w+)\)\))");
  for (const auto& v : node["x-kubernetes-validations"]) {
    std::string a, b;
    const std::string rule = v["rule"].as<std::string>();
    if (RE2::FullMatch(rule, kExclusive, &a, &b)) {
      out.insert(Describe(path, "exclusive", a + "," + b + " " + v["message"].as<std::string>()));
    } else {
      out.insert(Describe(path, "cel", rule));  // a rule kmodd's decoder does not apply
    }
  }
  for (const auto& p : node["properties"]) {
    SchemaRules(p.second, path + "." + p.first.as<std::string>(), out);
  }
  if (node["items"]) {
    SchemaRules(node["items"], path + "[]", out);
  }
}

}  // namespace

TEST_CASE("the CRD's schema holds exactly the rules the decoder applies (crd_rules.yaml)") {
  const std::string crd = std::string(KMODD_SOURCE_DIR) + "/deploy/crd/kmm.sigs.x-k8s.io_modules.yaml";
  const std::string helm =
      std::string(KMODD_SOURCE_DIR) + "/deploy/helm/kmodd/crds/kmm.sigs.x-k8s.io_modules.yaml";
  auto text = kmodd::ReadFile(crd);
  REQUIRE(text.ok());
  CHECK(kmodd::ReadFile(helm).value_or("") == *text);
  const YAML::Node schema =
      YAML::Load(*text)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
  std::set<std::string> in_crd;
  for (const char* top : {"metadata", "spec"}) {  // status is the controller's, not a user's
    SchemaRules(schema[top], top, in_crd);
  }
  INFO("run deploy/crd/generate.py when crd_rules.yaml changes");
  CHECK(in_crd == TableRules());
}

TEST_CASE("every CRD rule has a case that breaks it in crd_cases.yaml") {
  std::set<std::string> named;  // every refused path, with list indexes as []
  static const RE2 kIndex(R"(\[\d+\])");
  for (const auto& c : LoadCrdCases()) {
    for (std::string path : c.refused_at) {
      RE2::GlobalReplace(&path, kIndex, "[]");
      named.insert(path);
    }
  }
  for (const CrdRule& r : *kmodd::api::CrdRules()) {
    if (r.kind != Kind::kDefault) {
      CAPTURE(r.path);
      CHECK(named.count(r.path) == 1);
    }
  }
}

TEST_CASE("CRD rules that are malformed are refused with the rule's line") {
  struct Row {
    const char* text;
    const char* message;
  };
  for (const Row& row : {
           Row{"rules:\n  - {path: spec.x}\n", "no rule"},
           Row{"rules:\n  - {path: spec.x, required: true}\n", "no hint"},
           Row{"rules:\n  - {path: spec.x, required: true, minItems: 1, hint: h}\n", "both"},
           Row{"rules:\n  - {path: 'spec.x{a,b', required: true, hint: h}\n", "unbalanced"},
           Row{"rules:\n  - {path: 'spec.x[]', required: true, hint: h}\n", "names a field"},
           Row{"rules:\n  - {path: spec.x, pattern: '(', hint: h}\n", "does not compile"},
           Row{"rules:\n  - {path: spec, exclusive: [a], message: m, hint: h}\n", "two fields"},
       }) {
    DYNAMIC_SECTION(row.text) {
      auto rules = kmodd::api::ParseCrdRules(row.text);
      REQUIRE_FALSE(rules.ok());
      CHECK_THAT(std::string(rules.status().message()), Catch::Contains(row.message));
      CHECK_THAT(std::string(rules.status().message()), Catch::Contains("line 2"));
    }
  }
  auto expanded = kmodd::api::ParseCrdRules(
      "rules:\n  - {path: 'spec.{a,b}{,.c[]}.d', required: true, hint: h}\n");
  REQUIRE(expanded.ok());
  std::set<std::string> paths;
  for (const auto& r : *expanded) {
    paths.insert(r.path);
  }
  CHECK(paths == std::set<std::string>{"spec.a.d", "spec.a.c[].d", "spec.b.d", "spec.b.c[].d"});
}
