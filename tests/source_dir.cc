#include "tests/source_dir.h"

namespace kmodd::testing {
const char* SourceDir() { return KMODD_SOURCE_DIR_VALUE; }
}  // namespace kmodd::testing
