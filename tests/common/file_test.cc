#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "common/file.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;

TEST_CASE("WriteFileAtomic replaces a file and leaves no temporary behind") {
  const kmodd::testing::TempDir tmp("file-test");
  const std::string& dir = tmp.path;
  const std::string path = tmp / "state.json";
  REQUIRE(kmodd::WriteFileAtomic(path, "one").ok());
  REQUIRE(kmodd::WriteFileAtomic(path, "two", 0600).ok());
  auto got = kmodd::ReadFile(path);
  REQUIRE(got.ok());
  CHECK(*got == "two");
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) {
    ++entries;
  }
  CHECK(entries == 1);
}

TEST_CASE("file errors name the path and map errno to what the caller should do") {
  auto missing = kmodd::ReadFile("/nonexistent/kmodd/x");
  REQUIRE_FALSE(missing.ok());
  CHECK(absl::IsNotFound(missing.status()));
  CHECK(std::string(missing.status().message()).find("/nonexistent/kmodd/x") != std::string::npos);
  auto bad_dir = kmodd::WriteFileAtomic("/nonexistent/kmodd/x", "y");
  CHECK(absl::IsNotFound(bad_dir));
  CHECK(absl::IsUnavailable(kmodd::ErrnoStatus(EBUSY, "rmmod", "m")));
  CHECK(absl::IsPermissionDenied(kmodd::ErrnoStatus(EPERM, "init_module", "m")));
}
