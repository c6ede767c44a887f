// The pure parts of builds and signing: KMM's merge of the container's and the mapping's
// build and sign, the build hash that decides a rebuild, and the process runner's output.
#include <catch2/catch.hpp>

#include <string>

#include "controller/build/buildah_builder.h"
#include "controller/build/process.h"
#include "controller/placement/mapping.h"

namespace kmodd {
namespace {

api::ModuleLoaderContainerSpec WithBuild() {
  api::ModuleLoaderContainerSpec c;
  api::Build b;
  b.dockerfile_config_map = api::LocalObjectReference{"container-df"};
  b.build_args = {{"A", "container"}, {"B", "container"}};
  b.secrets = {{"s1"}};
  b.selector = {{"role", "builder"}};
  b.base_image_registry_tls.insecure = true;
  c.build = b;
  return c;
}

TEST_CASE("build: the mapping's build merges into the container's as KMM merges them") {
  api::ModuleLoaderContainerSpec c = WithBuild();
  api::KernelMapping km;
  api::Build mb;
  mb.dockerfile_config_map = api::LocalObjectReference{"mapping-df"};
  mb.build_args = {{"B", "mapping"}, {"C", "mapping"}};
  mb.secrets = {{"s2"}};
  mb.selector = {{"role", "ignored"}};
  km.build = mb;
  auto b = placement::MergedBuild(c, &km);
  REQUIRE(b.has_value());
  CHECK(b->dockerfile_config_map->name == "mapping-df");
  REQUIRE(b->build_args.size() == 3);
  CHECK(b->build_args[0].value == "container");  // A
  CHECK(b->build_args[1].value == "mapping");    // B: the mapping's wins
  CHECK(b->build_args[2].name == "C");           // new names appended
  REQUIRE(b->secrets.size() == 2);
  CHECK(b->secrets[1].name == "s2");
  CHECK(b->selector.at("role") == "builder");  // the mapping's selector is ignored
  CHECK(b->base_image_registry_tls.insecure);  // and its TLS
  // One level alone is used as it is; neither: none.
  CHECK(placement::MergedBuild(c, nullptr)->dockerfile_config_map->name == "container-df");
  api::ModuleLoaderContainerSpec bare;
  CHECK(placement::MergedBuild(bare, &km)->dockerfile_config_map->name == "mapping-df");
  CHECK_FALSE(placement::MergedBuild(bare, nullptr).has_value());
}

TEST_CASE("sign: the mapping's sign merges into the container's as KMM merges them") {
  api::ModuleLoaderContainerSpec c;
  api::Sign cs;
  cs.unsigned_image = "r/u:container";
  cs.key_secret = api::LocalObjectReference{"ck"};
  cs.cert_secret = api::LocalObjectReference{"cc"};
  cs.files_to_sign = {"/opt/a.ko"};
  cs.unsigned_image_registry_tls.insecure = true;
  c.sign = cs;
  api::KernelMapping km;
  api::Sign ms;
  ms.unsigned_image = "r/u:mapping";
  ms.key_secret = api::LocalObjectReference{"mk"};
  ms.files_to_sign = {"/opt/b.ko"};
  km.sign = ms;
  auto s = placement::MergedSign(c, &km);
  REQUIRE(s.has_value());
  CHECK(s->unsigned_image == "r/u:mapping");
  CHECK(s->key_secret->name == "mk");
  CHECK(s->cert_secret->name == "cc");  // not set on the mapping: the container's
  CHECK(s->files_to_sign == std::vector<std::string>{"/opt/a.ko", "/opt/b.ko"});
  CHECK(s->unsigned_image_registry_tls.insecure);  // the container's only
  CHECK_FALSE(placement::MergedSign(api::ModuleLoaderContainerSpec{}, nullptr).has_value());
}

TEST_CASE("build hash: the Dockerfile, the arguments (last value by name) and the trigger, nothing else") {
  build::BuildSpec a;
  a.dockerfile = "FROM x\n";
  a.args = {{"KERNEL_FULL_VERSION", "6.1.0-1"}, {"X", "1"}};
  const std::string h = build::BuildHash(a);
  build::BuildSpec same = a;
  same.args = {{"X", "0"}, {"KERNEL_FULL_VERSION", "6.1.0-1"}, {"X", "1"}};  // order, overridden
  CHECK(build::BuildHash(same) == h);
  same.base_plain_http = true;  // how the base is pulled is not what is built
  CHECK(build::BuildHash(same) == h);
  build::BuildSpec other = a;
  other.dockerfile = "FROM y\n";
  CHECK(build::BuildHash(other) != h);
  other = a;
  other.args.emplace_back("X", "2");
  CHECK(build::BuildHash(other) != h);
  other = a;
  other.rebuild_trigger = 1;
  CHECK(build::BuildHash(other) != h);
  // Boundaries are part of it: "ab" + "c" is not "a" + "bc".
  build::BuildSpec p1;
  p1.args = {{"ab", "c"}};
  build::BuildSpec p2;
  p2.args = {{"a", "bc"}};
  CHECK(build::BuildHash(p1) != build::BuildHash(p2));
}

TEST_CASE("process: output and exit code of a real program, no shell between") {
  auto r = build::RunProcess({"sh", "-c", "echo out; echo err >&2; exit 3"});
  REQUIRE(r.ok());
  CHECK(r->exit_code == 3);
  CHECK(r->output.find("out\n") != std::string::npos);
  CHECK(r->output.find("err\n") != std::string::npos);
  auto quoted = build::RunProcess({"echo", "a; rm -rf /", "$(id)"});
  REQUIRE(quoted.ok());
  CHECK(quoted->output == "a; rm -rf / $(id)\n");  // arguments are not interpreted
  auto missing = build::RunProcess({"/nonexistent/buildah"});
  REQUIRE(missing.ok());
  CHECK(missing->exit_code == 127);
  CHECK(missing->output.find("cannot run /nonexistent/buildah") != std::string::npos);
  auto capped = build::RunProcess({"sh", "-c", "yes | head -c 100000; echo END"}, 1000);
  REQUIRE(capped.ok());
  CHECK(capped->output.size() == 1000);
  CHECK(capped->output.ends_with("END\n"));  // the tail is kept
  CHECK(build::Tail("a\nb\nc\nd\n", 2) == "c\nd");
  CHECK(build::Tail("one line", 5) == "one line");
}

}  // namespace
}  // namespace kmodd
