#pragma once

// The Value of a JSON text a test wrote itself: a parse error fails the test, showing the text.

#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "common/json.h"

namespace kmodd::testing {

inline Value MustParse(const std::string& text) {
  absl::StatusOr<Value> v = ParseJson(text);
  INFO(text);
  REQUIRE(v.status().ToString() == "OK");
  return *std::move(v);
}

}  // namespace kmodd::testing
