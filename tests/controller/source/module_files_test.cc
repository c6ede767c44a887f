#include "controller/source/module_files.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/api/crd_cases.h"

using kmodd::source::ModuleChanges;
using kmodd::source::ModuleFiles;

namespace {

std::string ModuleYaml(const std::string& name, const std::string& image,
                       const std::string& ns = "demo") {
  return absl::StrCat(
      "apiVersion: kmm.sigs.x-k8s.io/v1beta1\nkind: Module\nmetadata:\n  name: ", name,
      "\n  namespace: ", ns,
      "\nspec:\n  selector: {role: worker}\n  moduleLoader:\n    container:\n"
      "      modprobe: {moduleName: m_",
      name.substr(0, 1),
      "}\n      kernelMappings:\n        - regexp: '^.+$'\n          containerImage: ", image,
      "\n");
}

std::vector<std::string> SetKeys(const ModuleChanges& c) {
  std::vector<std::string> keys;
  for (const auto& m : c.set) {
    keys.push_back(m.Key());
  }
  return keys;
}

}  // namespace

TEST_CASE("module files: a new file adds its Modules, an unchanged one changes nothing") {
  ModuleFiles f;
  ModuleChanges c = f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1") + "---\n" + ModuleYaml("b", "r/b:1"));
  CHECK(SetKeys(c) == std::vector<std::string>{"demo/a", "demo/b"});
  CHECK(c.removed.empty());
  CHECK(f.ModuleCount() == 2);
  CHECK(f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1") + "---\n" + ModuleYaml("b", "r/b:1")).empty());
}

TEST_CASE("module files: an edit sets only the Modules that changed and removes the dropped") {
  ModuleFiles f;
  (void)f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1") + "---\n" + ModuleYaml("b", "r/b:1"));
  ModuleChanges c = f.Update("/d/a.yaml", ModuleYaml("a", "r/a:2"));
  CHECK(SetKeys(c) == std::vector<std::string>{"demo/a"});
  CHECK(c.removed == std::vector<std::string>{"demo/b"});
  CHECK(f.ModuleCount() == 1);
}

TEST_CASE("module files: a file that does not decode keeps its Modules and is reported") {
  ModuleFiles f;
  (void)f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1"));
  ModuleChanges c = f.Update("/d/a.yaml", "apiVersion: [unterminated\n");
  CHECK(c.empty());
  CHECK(f.ModuleCount() == 1);
  REQUIRE(f.Errors().size() == 1);
  CHECK(f.Errors()[0].source == "/d/a.yaml");
}

TEST_CASE("module files: a Module that fails validation keeps the version in force") {
  ModuleFiles f;
  (void)f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1"));
  std::string bad = ModuleYaml("a", "r/a:2");
  bad.replace(bad.find("'^.+$'"), 6, "'^6\\.1\\.(['");
  ModuleChanges c = f.Update("/d/a.yaml", bad);
  CHECK(c.empty());
  REQUIRE(f.Errors().size() == 1);
  CHECK(f.Errors()[0].path == "spec.moduleLoader.container.kernelMappings[0].regexp");
  CHECK(f.Errors()[0].object == "Module demo/a");
  CHECK(f.Errors()[0].line > 0);
  // Fixed: the new version goes in, the error goes away.
  c = f.Update("/d/a.yaml", ModuleYaml("a", "r/a:3"));
  CHECK(SetKeys(c) == std::vector<std::string>{"demo/a"});
  CHECK(c.set[0].spec.module_loader->container.kernel_mappings[0].container_image == "r/a:3");
  CHECK(f.Errors().empty());
}

TEST_CASE("module files: a deleted file removes its Modules and its errors") {
  ModuleFiles f;
  (void)f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1"));
  (void)f.Update("/d/bad.yaml", "kind: [\n");
  CHECK(f.Errors().size() == 1);
  ModuleChanges c = f.Update("/d/a.yaml", std::nullopt);
  CHECK(c.removed == std::vector<std::string>{"demo/a"});
  CHECK(f.Update("/d/bad.yaml", std::nullopt).empty());
  CHECK(f.Errors().empty());
  CHECK(f.Files().empty());
}

TEST_CASE("module files: a Module in two files stays with the first, until it lets go") {
  ModuleFiles f;
  (void)f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1"));
  ModuleChanges c = f.Update("/d/b.yaml", ModuleYaml("a", "r/a:2"));
  CHECK(c.empty());
  REQUIRE(f.Errors().size() == 1);
  CHECK(f.Errors()[0].source == "/d/b.yaml");
  CHECK(f.Errors()[0].message.find("already defined in /d/a.yaml") != std::string::npos);
  // a.yaml goes: b.yaml, rejected only for the name, is taken at once.
  c = f.Update("/d/a.yaml", std::nullopt);
  CHECK(c.removed == std::vector<std::string>{"demo/a"});
  CHECK(SetKeys(c) == std::vector<std::string>{"demo/a"});
  CHECK(c.set[0].spec.module_loader->container.kernel_mappings[0].container_image == "r/a:2");
  CHECK(f.Errors().empty());
}

TEST_CASE("module files: Node documents are ignored with a warning") {
  ModuleFiles f;
  ModuleChanges c = f.Update("/d/a.yaml", ModuleYaml("a", "r/a:1") +
                                              "---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n");
  CHECK(SetKeys(c) == std::vector<std::string>{"demo/a"});
  CHECK(f.Errors().empty());
  REQUIRE(f.Warnings().size() == 1);
  CHECK(f.Warnings()[0].object == "Node n1");
}

TEST_CASE("module files: refuse what the Module CRD refuses, naming the same field paths") {
  for (const kmodd::testing::CrdCase& c : kmodd::testing::LoadCrdCases()) {
    DYNAMIC_SECTION(c.name << ": " << c.description) {
      ModuleFiles f;
      const ModuleChanges changes = f.Update("/d/" + c.name + ".yaml", c.text);
      std::set<std::string> paths;
      for (const auto& e : f.Errors()) {
        UNSCOPED_INFO(e.ToString());
        paths.insert(e.path);
      }
      CHECK(paths == c.refused_at);
      CHECK(changes.set.size() == (c.refused_at.empty() ? 1 : 0));
    }
  }
}
