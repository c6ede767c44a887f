#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "tests/must_parse.h"

namespace kmodd {
namespace {

using testing::MustParse;

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
      {std::string(300, '[') + std::string(300, ']'), "nesting deeper than 200 levels"},
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

TEST_CASE("JSON reads a Node with 100,000 labels, a repeated one keeping its last value") {
  std::string text = R"({"metadata":{"name":"n","labels":{)";
  for (int i = 0; i < 100000; ++i) {
    absl::StrAppend(&text, i > 0 ? "," : "", "\"example.com/l-", i, "\":\"v", i, "\"");
  }
  absl::StrAppend(&text, R"(,"example.com/l-7":"again","example.com/l-99999":"last"}}})");
  const Value v = MustParse(text);
  const Value* labels = Lookup(v, {"metadata", "labels"});
  REQUIRE(labels != nullptr);
  REQUIRE(labels->AsMap().size() == 100000);
  CHECK(labels->AsMap()[7].first == "example.com/l-7");
  CHECK(labels->AsMap()[7].second.AsString() == "again");
  CHECK(labels->AsMap()[99998].second.AsString() == "v99998");
  CHECK(StringAt(v, {"metadata", "labels", "example.com/l-99999"}) == "last");
  CHECK(StringAt(v, {"metadata", "labels", "example.com/l-50000"}) == "v50000");
}

TEST_CASE("JSON refuses a document over its limits, naming the limit") {
  JsonLimits small;
  small.max_depth = 3;
  small.max_keys_per_object = 4;
  small.max_values = 10;
  struct Row {
    std::string text;
    std::string error;  // "" = parses
  };
  const std::vector<Row> rows = {
      {R"({"a":{"b":{"c":1}}})", ""},
      {R"({"a":{"b":{"c":[1]}}})", "JSON: nesting deeper than 3 levels at offset 16"},
      {R"({"a":1,"b":2,"c":3,"d":4})", ""},
      {R"({"a":1,"b":2,"c":3,"d":4,"a":5})", ""},  // a repeated key is not a new one
      {R"({"a":1,"b":2,"c":3,"d":4,"e":5})", "JSON: more than 4 keys in one object at offset 30"},
      {R"([1,2,3,4,5,6,7,8,9])", ""},
      {R"([1,2,3,4,5,6,7,8,9,10])", "JSON: more than 10 values in one document at offset 19"},
  };
  for (const Row& row : rows) {
    INFO(row.text);
    absl::StatusOr<Value> v = ParseJson(row.text, small);
    CHECK(v.status().message() == row.error);
  }
  // The defaults are the documented ones.
  CHECK(JsonLimits{}.max_keys_per_object == 1048576);
  CHECK(JsonLimits{}.max_values == 16777216);
  CHECK(JsonLimits{}.max_depth == 200);
}

TEST_CASE("JSON strings must be UTF-8") {
  struct Row {
    std::string bytes;
    bool ok;
  };
  const std::vector<Row> rows = {
      {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", true},  // é € 😀
      {"\xf4\x8f\xbf\xbf", true},                      // U+10FFFF
      {"\xff", false},
      {"\x80", false},                  // a continuation byte alone
      {"\xc0\xaf", false},              // overlong '/'
      {"\xe0\x80\xaf", false},          // overlong, three bytes
      {"\xed\xa0\x80", false},          // a UTF-16 surrogate
      {"\xf4\x90\x80\x80", false},      // past U+10FFFF
      {"\xe2\x82", false},              // cut short
      {"\xe2\x82x", false},
  };
  for (const Row& row : rows) {
    const std::string text = "{\"k\":\"a" + row.bytes + "b\"}";
    INFO(text);
    absl::StatusOr<Value> v = ParseJson(text);
    CHECK(v.ok() == row.ok);
    if (row.ok) {
      CHECK(StringAt(*v, {"k"}) == "a" + row.bytes + "b");
    } else {
      CHECK(v.status().message() == "JSON: invalid UTF-8 in a string at offset 7");
    }
    // Keys too.
    CHECK(ParseJson("{\"" + row.bytes + "\":1}").ok() == row.ok);
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
