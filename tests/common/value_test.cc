#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include "common/value.h"

using kmodd::Value;

TEST_CASE("JSON output escapes strings and keeps key order") {
  Value v = Value::EmptyMap();
  v.Set("z", "a\"b\\c\n\x01");
  v.Set("a", Value::List{1, true, nullptr, Value::EmptyMap(), Value::EmptyList()});
  CHECK(kmodd::ToJson(v) ==
        "{\n  \"z\": \"a\\\"b\\\\c\\n\\u0001\",\n  \"a\": [\n    1,\n    true,\n    null,\n"
        "    {},\n    []\n  ]\n}\n");
}

TEST_CASE("YAML output quotes strings that would read back as another type") {
  Value v = Value::EmptyMap();
  for (const char* s : {"true", "no", "1.0", "42", "", "~", "null", "on"}) {
    v.Set(std::string("k") + s, s);
  }
  v.Set("plain", "6.1.0-27-cloud-amd64");
  v.Set("flag", false);
  const std::string out = kmodd::ToYaml(v);
  YAML::Node back = YAML::Load(out);
  for (const char* s : {"true", "no", "1.0", "42", "", "~", "null", "on"}) {
    INFO(s);
    const YAML::Node n = back[std::string("k") + s];
    CHECK(n.Tag() == "!");  // quoted: a string, whatever it looks like
    CHECK(n.Scalar() == s);
  }
  CHECK(back["plain"].Tag() == "?");
  CHECK(back["plain"].Scalar() == "6.1.0-27-cloud-amd64");
  CHECK(back["flag"].as<bool>() == false);
}

TEST_CASE("Value lookups find map keys and nothing in other kinds") {
  Value v = Value::EmptyMap();
  v.Set("a", 1);
  REQUIRE(v.Find("a") != nullptr);
  CHECK(v.Find("a")->AsInt() == 1);
  CHECK(v.Find("b") == nullptr);
  CHECK(Value("s").Find("a") == nullptr);
}
