#pragma once

// For the tables of hostile ModulePolicy documents: `text` decodes to no policy and an
// error on field `path` whose message contains `message`.

#include <catch2/catch.hpp>

#include <string>

#include "api/decode.h"

namespace kmodd::testing {

inline void ExpectPolicyRejected(const std::string& text, const char* path, const char* message) {
  const api::Decoded d = api::DecodeDocuments(text, "p.yaml");
  CHECK(d.policies.empty());
  REQUIRE_FALSE(d.errors.empty());
  bool named = false;
  for (const auto& e : d.errors) {
    named = named || (e.path == path && e.message.find(message) != std::string::npos);
  }
  INFO(d.errors.front().ToString());
  CHECK(named);
}

}  // namespace kmodd::testing
