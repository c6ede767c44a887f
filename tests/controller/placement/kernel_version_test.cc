#include <catch2/catch.hpp>

#include "controller/placement/kernel_version.h"

using kmodd::placement::NormalizeKernelVersion;
using kmodd::placement::Substitute;
using kmodd::placement::TemplateVars;
using kmodd::placement::TrimKernelPlus;

TEST_CASE("kernel versions lose exactly one trailing plus, as KMM trims them") {
  CHECK(TrimKernelPlus("6.12.9+") == "6.12.9");
  CHECK(TrimKernelPlus("6.12.9++") == "6.12.9+");
  CHECK(TrimKernelPlus("6.12.9") == "6.12.9");
  CHECK(TrimKernelPlus("") == "");
}

TEST_CASE("kernel normalisation replaces characters outside [A-Za-z0-9._-] with underscores") {
  CHECK(NormalizeKernelVersion("5.14.0-427.el9_4.x86_64") == "5.14.0-427.el9_4.x86_64");
  CHECK(NormalizeKernelVersion("6.1.0+rt/7 ~x") == "6.1.0_rt_7__x");
}

TEST_CASE("template variables split the normalised kernel on dots, commas and dashes") {
  struct Row {
    const char* kernel;
    const char* xyz;
    const char* x;
    const char* y;
    const char* z;
  };
  const Row rows[] = {
      {"6.1.0-27-cloud-amd64", "6.1.0", "6", "1", "0"},
      {"5.14.0-427.13.1.el9_4.x86_64", "5.14.0", "5", "14", "0"},
      {"6.12-rc1-x", "6.12.rc1", "6", "12", "rc1"},
  };
  for (const auto& r : rows) {
    auto vars = TemplateVars(r.kernel, "m", "ns");
    REQUIRE(vars.ok());
    auto s = Substitute("$KERNEL_XYZ|$KERNEL_X|$KERNEL_Y|$KERNEL_Z|$KERNEL_FULL_VERSION", *vars);
    REQUIRE(s.ok());
    CHECK(*s == std::string(r.xyz) + "|" + r.x + "|" + r.y + "|" + r.z + "|" +
                    NormalizeKernelVersion(r.kernel));
  }
}

TEST_CASE("a kernel with fewer than three components has no template variables") {
  auto vars = TemplateVars("6.1", "m", "ns");
  REQUIRE_FALSE(vars.ok());
  // Commas are normalised to '_' before the split, so KMM never splits on them either.
  CHECK_FALSE(TemplateVars("4,18,0", "m", "ns").ok());
  CHECK(std::string(vars.status().message()).find("three components") != std::string::npos);
}

TEST_CASE("substitution expands $VAR, ${VAR} and ${VAR:-default}") {
  auto vars = TemplateVars("6.1.0-27-cloud-amd64", "acme", "net");
  REQUIRE(vars.ok());
  struct Row {
    const char* tmpl;
    const char* want;
  };
  const Row rows[] = {
      {"r/$MOD_NAMESPACE/$MOD_NAME:$KERNEL_VERSION", "r/net/acme:6.1.0-27-cloud-amd64"},
      {"r/${MOD_NAME}:${KERNEL_X}.${KERNEL_Y}", "r/acme:6.1"},
      {"r/x:${FLAVOUR:-generic}", "r/x:generic"},
      {"r/x:${MOD_NAME:-unused}", "r/x:acme"},
      {"r/x:${FLAVOUR:-}", "r/x:"},
      {"cost$$5", "cost$5"},
      {"trailing$", "trailing$"},
      {"a$-b", "a$-b"},
      {"plain", "plain"},
  };
  for (const auto& r : rows) {
    INFO(r.tmpl);
    auto s = Substitute(r.tmpl, *vars);
    REQUIRE(s.ok());
    CHECK(*s == r.want);
  }
}

TEST_CASE("substitution refuses an unknown variable without a default, naming the known ones") {
  auto vars = TemplateVars("6.1.0", "m", "ns");
  REQUIRE(vars.ok());
  for (const char* tmpl : {"r/x:$MODULE_VERSION", "r/x:${MODULE_VERSION}"}) {
    auto s = Substitute(tmpl, *vars);
    REQUIRE_FALSE(s.ok());
    const std::string msg(s.status().message());
    CHECK(msg.find("unknown variable $MODULE_VERSION") != std::string::npos);
    CHECK(msg.find("KERNEL_FULL_VERSION") != std::string::npos);
  }
}

TEST_CASE("substitution refuses malformed and unsupported ${} forms") {
  auto vars = TemplateVars("6.1.0", "m", "ns");
  REQUIRE(vars.ok());
  CHECK_FALSE(Substitute("r/x:${KERNEL_X", *vars).ok());
  CHECK_FALSE(Substitute("r/x:${}", *vars).ok());
  CHECK_FALSE(Substitute("r/x:${KERNEL_X:+alt}", *vars).ok());
  CHECK_FALSE(Substitute("r/x:${1abc}", *vars).ok());
}
