#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/json.h"

namespace kmodd {
namespace {

Value MustParse(const std::string& text) {
  absl::StatusOr<Value> v = ParseJson(text);
  INFO(text);
  REQUIRE(v.status().ToString() == "OK");
  return *std::move(v);
}

TEST_CASE("JSON parses a Kubernetes object keeping key order and exact integers") {
  const Value v = MustParse(
      R"({"kind":"ConfigMap","metadata":{"name":"a","generation":9007199254740993},)"
      R"("data":{"z":"1","a":"\"q\"\\\/\n\u00e9\ud83d\ude00"},"list":[true,false,null,-5]})");
  CHECK(ToJsonLine(v) ==
        R"({"kind":"ConfigMap","metadata":{"name":"a","generation":9007199254740993},)"
        R"("data":{"z":"1","a":"\"q\"\\/\né😀"},"list":[true,false,null,-5]})");
  CHECK(IntAt(v, {"metadata", "generation"}) == 9007199254740993);
  CHECK(StringAt(v, {"data", "z"}) == "1");
  CHECK(StringAt(v, {"metadata", "missing"}).empty());
}

TEST_CASE("JSON keeps the last of a repeated key, as Go does") {
  CHECK(ToJsonLine(MustParse(R"({"a":1,"b":2,"a":3})")) == R"({"a":3,"b":2})");
}

TEST_CASE("JSON replaces a lone surrogate escape with U+FFFD") {
  CHECK(StringAt(MustParse(R"({"s":"x\ud800y"})"), {"s"}) == "x\xEF\xBF\xBDy");
}

TEST_CASE("JSON errors say what is wrong and where") {
  struct Row {
    std::string text;
    std::string message;
  };
  const std::vector<Row> rows = {
      {R"({"a":1.5})", "fraction or exponent"},
      {R"({"a":1e3})", "fraction or exponent"},
      {R"({"a":99999999999999999999})", "int64 range"},
      {R"({"a":01})", "leading zero"},
      {R"({"a":1,})", "expected a string key"},
      {R"({"a" 1})", "expected ':'"},
      {R"([1 2])", "expected ',' or ']'"},
      {R"({"a":"x)", "unterminated string"},
      {"{\"a\":\"\x01\"}", "control character"},
      {R"({"a":"\x"})", "invalid escape"},
      {R"({"a":tru})", "unexpected character"},
      {R"({} {})", "after the value"},
      {"", "unexpected end"},
      {std::string(300, '[') + std::string(300, ']'), "nesting too deep"},
  };
  for (const Row& row : rows) {
    INFO(row.text);
    absl::StatusOr<Value> v = ParseJson(row.text);
    REQUIRE_FALSE(v.ok());
    CHECK(v.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(v.status().message()), Catch::Contains(row.message));
    CHECK_THAT(std::string(v.status().message()), Catch::Contains("at offset"));
  }
}

TEST_CASE("The JSON framer finds every event wherever the stream is cut") {
  // Braces and quotes inside strings, escapes, multi-byte UTF-8, with and without newlines.
  const std::string stream =
      "{\"type\":\"ADDED\",\"object\":{\"s\":\"}{][\\\"\\\\\",\"u\":\"\xC3\xA9\"}}\n"
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}"
      "  [1,{\"a\":[]}]\r\n";
  const std::vector<std::string> want = {
      "{\"type\":\"ADDED\",\"object\":{\"s\":\"}{][\\\"\\\\\",\"u\":\"\xC3\xA9\"}}",
      "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}",
      "[1,{\"a\":[]}]"};
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= stream.size(); cut2 += 7) {
      INFO("cuts at " << cut << " and " << cut2);
      JsonFramer framer;
      std::vector<std::string> got;
      auto sink = [&got](std::string_view v) {
        got.emplace_back(v);
        return absl::OkStatus();
      };
      REQUIRE(framer.Feed(stream.data(), cut, sink).ok());
      REQUIRE(framer.Feed(stream.data() + cut, cut2 - cut, sink).ok());
      REQUIRE(framer.Feed(stream.data() + cut2, stream.size() - cut2, sink).ok());
      CHECK(got == want);
      CHECK(framer.AtBoundary());
    }
  }
}

TEST_CASE("The JSON framer reports a partial value, garbage, and values over its limit") {
  JsonFramer framer;
  auto ignore = [](std::string_view) { return absl::OkStatus(); };
  REQUIRE(framer.Feed("{\"a\":", 5, ignore).ok());
  CHECK_FALSE(framer.AtBoundary());

  JsonFramer garbage;
  CHECK(garbage.Feed("oops", 4, ignore).code() == absl::StatusCode::kInvalidArgument);

  JsonFramer small(8);
  CHECK(small.Feed("{\"abcdefgh\":1}", 14, ignore).code() ==
        absl::StatusCode::kResourceExhausted);

  JsonFramer stopping;
  auto fail = [](std::string_view) { return absl::CancelledError("enough"); };
  CHECK(stopping.Feed("{}{}", 4, fail).code() == absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace kmodd
