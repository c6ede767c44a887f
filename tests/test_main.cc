#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "common/beneath.h"

// KMODD_TEST_RESOLVER=walk runs the tests with the fallback walk of common/beneath.h forced
// in place of openat2 (ctest "unit (walk): ..."), so that every firmware and image test
// also proves the path the agent takes on a kernel without openat2.
int main(int argc, char* argv[]) {
  std::optional<kmodd::ScopedResolverForTesting> forced;
  if (const char* resolver = std::getenv("KMODD_TEST_RESOLVER"); resolver != nullptr) {
    if (std::string_view(resolver) != "walk") {
      std::fprintf(stderr, "KMODD_TEST_RESOLVER=%s: only \"walk\" is known\n", resolver);
      return 2;
    }
    forced.emplace(kmodd::Resolver::kWalk);
  }
  return Catch::Session().run(argc, argv);
}
