#pragma once
// The checkout the unit tests were built from, for tests that read its files (the CRD, the
// golden files) or run its scripts (tools/registry). Defined in one translation unit
// (source_dir.cc, the only one compiled with the path), so that every other test file
// compiles the same in any checkout and a fresh clone's build hits the compiler cache.

namespace kmodd::testing {
const char* SourceDir();
}  // namespace kmodd::testing

#define KMODD_SOURCE_DIR (::kmodd::testing::SourceDir())
