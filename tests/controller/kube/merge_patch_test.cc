#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/json.h"
#include "controller/kube/merge_patch.h"
#include "tests/must_parse.h"

namespace kmodd::kube {
namespace {

using testing::MustParse;

TEST_CASE("Merge patch follows RFC 7386") {
  struct Row {
    std::string target;
    std::string patch;
    std::string result;
  };
  // The RFC's own examples, and Kubernetes-shaped ones.
  const std::vector<Row> rows = {
      {R"({"a":"b"})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"b"})", R"({"b":"c"})", R"({"a":"b","b":"c"})"},
      {R"({"a":"b"})", R"({"a":null})", R"({})"},
      {R"({"a":"b","b":"c"})", R"({"a":null})", R"({"b":"c"})"},
      {R"({"a":["b"]})", R"({"a":"c"})", R"({"a":"c"})"},
      {R"({"a":"c"})", R"({"a":["b"]})", R"({"a":["b"]})"},
      {R"({"a":{"b":"c"}})", R"({"a":{"b":"d","c":null}})", R"({"a":{"b":"d"}})"},
      {R"({"a":[{"b":"c"}]})", R"({"a":[1]})", R"({"a":[1]})"},
      {R"(["a","b"])", R"(["c","d"])", R"(["c","d"])"},
      {R"({"a":"b"})", R"(["c"])", R"(["c"])"},
      {R"({"e":null})", R"({"a":1})", R"({"e":null,"a":1})"},
      {R"([1,2])", R"({"a":"b","c":null})", R"({"a":"b"})"},
      {R"({})", R"({"a":{"bb":{"ccc":null}}})", R"({"a":{"bb":{}}})"},
      {R"({"metadata":{"labels":{"x":"1","y":"2"}}})",
       R"({"metadata":{"labels":{"x":null,"z":"3"}}})",
       R"({"metadata":{"labels":{"y":"2","z":"3"}}})"},
  };
  for (const Row& row : rows) {
    INFO(row.target << " + " << row.patch);
    CHECK(ToJsonLine(ApplyMergePatch(MustParse(row.target), MustParse(row.patch))) ==
          row.result);
  }
}

}  // namespace
}  // namespace kmodd::kube
