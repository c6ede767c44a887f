#include <catch2/catch.hpp>

#include "node-agent/reconcile/modprobe_args.h"

using kmodd::api::ModprobeArgs;
using kmodd::api::ModprobeSpec;
using kmodd::reconcile::InterpretLoad;
using kmodd::reconcile::InterpretUnload;

TEST_CASE("moduleName form: loading order reversed, parameters for the main module") {
  ModprobeSpec s;
  s.module_name = "xe";
  s.parameters = {"a=1", "b=2"};
  s.modules_loading_order = std::vector<std::string>{"xe", "drm_gpuvm", "drm_exec"};
  s.args = ModprobeArgs{{"-v", "--ignore-install"}, {}};
  auto c = InterpretLoad(s);
  REQUIRE(c.ok());
  CHECK(c->modules == std::vector<std::string>{"drm_exec", "drm_gpuvm", "xe"});
  CHECK(c->main_module == "xe");
  CHECK(c->params == "a=1 b=2");
  CHECK(c->dir_name == "/opt");
  auto u = InterpretUnload(s);
  REQUIRE(u.ok());
  CHECK(*u == std::vector<std::string>{"xe", "drm_gpuvm", "drm_exec"});
}

TEST_CASE("rawArgs are parsed, not run: names, parameters and -d") {
  ModprobeSpec s;
  s.raw_args = ModprobeArgs{{"-v", "-d", "/drivers", "mydrv", "debug=1"}, {"-r", "-d", "/drivers", "mydrv"}};
  auto c = InterpretLoad(s);
  REQUIRE(c.ok());
  CHECK(c->modules == std::vector<std::string>{"mydrv"});
  CHECK(c->params == "debug=1");
  CHECK(c->dir_name == "/drivers");
  CHECK(*InterpretUnload(s) == std::vector<std::string>{"mydrv"});
  s.raw_args = ModprobeArgs{{"-a", "one", "two"}, {"-r", "two", "one"}};
  CHECK(InterpretLoad(s)->modules == std::vector<std::string>{"one", "two"});
}

TEST_CASE("modprobe options kmodd does not support are refused with a clear error") {
  struct Row {
    std::vector<std::string> load;
    const char* message;
  };
  const Row rows[] = {
      {{"-f", "m"}, "\"-f\" is not supported"},
      {{"--force-vermagic", "m"}, "is not supported"},
      {{"-C", "/etc/x", "m"}, "is not supported"},
      {{"-n", "m"}, "is not supported"},
      {{"-r", "m"}, "belongs in unload"},
      {{"-v"}, "names no module"},
      {{"m", "notaparam"}, "neither an option nor a parameter"},
      {{"-d"}, "needs a directory"},
  };
  for (const auto& r : rows) {
    ModprobeSpec s;
    s.raw_args = ModprobeArgs{r.load, {"-r", "m"}};
    auto c = InterpretLoad(s);
    REQUIRE_FALSE(c.ok());
    CHECK(std::string(c.status().message()).find(r.message) != std::string::npos);
  }
  ModprobeSpec named;
  named.module_name = "m";
  named.args = ModprobeArgs{{"other_module"}, {}};
  CHECK_FALSE(InterpretLoad(named).ok());
  ModprobeSpec unload;
  unload.raw_args = ModprobeArgs{{"m"}, {"m"}};
  auto u = InterpretUnload(unload);
  REQUIRE_FALSE(u.ok());
  CHECK(std::string(u.status().message()).find("has no -r") != std::string::npos);
}
