#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "firmware/files.h"
#include "firmware/identity.h"
#include "firmware/stager.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using kmodd::firmware::Stager;
using kmodd::firmware::StagerOptions;

namespace {

void Put(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  REQUIRE(out.good());
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found;
}

// Every entry below `dir`, relative, sorted: temporary files and stray directories show here.
std::vector<std::string> Tree(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    return out;
  }
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out.push_back(e.path().lexically_relative(dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

std::string IdentityJson(const std::string& content) {
  kmodd::firmware::ContentHasher h;
  h.Update(content.data(), content.size());
  const kmodd::firmware::Identity id = h.Result();
  return absl::StrCat("\"size\": ", id.size, ", \"digest\": \"", id.digest, "\"");
}

// A temporary directory holding a firmware directory, a ledger, a stand-in for
// /sys/module/firmware_class/parameters/path and driver images.
class Rig {
 public:

  StagerOptions Options(bool with_param = false) const {
    StagerOptions o;
    o.firmware_dir = fw;
    o.ledger_path = ledger;
    if (with_param) {
      o.class_path_param = param;
    }
    return o;
  }

  Stager Open(bool with_param = false) const {
    auto s = Stager::Open(Options(with_param));
    REQUIRE(s.ok());
    return *std::move(s);
  }

  // An image's firmware directory with the given files.
  std::string Image(const std::string& name, const std::map<std::string, std::string>& files) {
    std::string dir = absl::StrCat(root, "/images/", name);
    fs::create_directories(dir);
    for (const auto& [rel, content] : files) {
      Put(absl::StrCat(dir, "/", rel), content);
    }
    return dir;
  }

  kmodd::testing::TempDir tmp{"firmware-test"};
  std::string root = tmp.path;
  std::string fw = tmp / "firmware";  // absent: the first Stage creates it
  std::string ledger = tmp / "state/firmware-ledger.json";
  std::string param = tmp / "firmware_class.path";
};

using Paths = std::vector<std::string>;

}  // namespace

TEST_CASE("staging puts the image's firmware directly in the firmware directory") {
  Rig rig;
  Stager stager = rig.Open();
  const std::string img = rig.Image("a", {{"kmm_ci_fw/fw.bin", "FW1"}, {"top.bin", "T"}});
  auto staged = stager.Stage("ns/a", img);
  REQUIRE(staged.ok());
  CHECK(*staged == Paths{"kmm_ci_fw/fw.bin", "top.bin"});
  // request_firmware("kmm_ci_fw/fw.bin") finds it: no module-name level in between.
  CHECK(Read(rig.fw + "/kmm_ci_fw/fw.bin") == "FW1");
  CHECK(Tree(rig.fw) == Paths{"kmm_ci_fw", "kmm_ci_fw/fw.bin", "top.bin"});
  CHECK(Mode(rig.fw + "/kmm_ci_fw/fw.bin") == 0644);
  CHECK(Mode(rig.fw + "/kmm_ci_fw") == 0755);
  const auto list = stager.List();
  REQUIRE(list.size() == 2);
  CHECK(list[0].path == "kmm_ci_fw/fw.bin");
  CHECK(list[0].size == 3);
  CHECK(list[0].digest.rfind("fnv1a64:", 0) == 0);
  CHECK(list[0].owners == Paths{"ns/a"});
  CHECK_FALSE(list[0].foreign);
}

TEST_CASE("a file shared by two owners stays until its last owner releases it") {
  Rig rig;
  Stager stager = rig.Open();
  REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"kmm_ci_fw/fw.bin", "same"}})).ok());
  REQUIRE(stager.Stage("ns/b", rig.Image("b", {{"kmm_ci_fw/fw.bin", "same"}})).ok());
  REQUIRE(stager.List().size() == 1);
  CHECK(stager.List()[0].owners == Paths{"ns/a", "ns/b"});

  REQUIRE(stager.Release("ns/a").ok());
  CHECK(Read(rig.fw + "/kmm_ci_fw/fw.bin") == "same");
  CHECK(stager.List()[0].owners == Paths{"ns/b"});

  REQUIRE(stager.Release("ns/b").ok());
  CHECK(stager.List().empty());
  CHECK(Tree(rig.fw).empty());      // the file and the directory kmodd made...
  CHECK(fs::is_directory(rig.fw));  // ...but never the firmware directory itself
  CHECK(stager.Release("ns/b").ok());
  CHECK(stager.Release("ns/never-staged").ok());
}

TEST_CASE("different content from a second owner is an error that names both and leaves nothing") {
  Rig rig;
  Stager stager = rig.Open();
  REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"shared.bin", "A"}})).ok());
  const auto before = stager.List();
  const std::string ledger_before = Read(rig.ledger);

  auto staged = stager.Stage("ns/b", rig.Image("b", {{"new/extra.bin", "X"}, {"shared.bin", "B"}}));
  REQUIRE_FALSE(staged.ok());
  CHECK(absl::IsFailedPrecondition(staged.status()));
  CHECK_THAT(Message(staged.status()),
             Catch::Contains("shared.bin") && Catch::Contains("ns/a") && Catch::Contains("ns/b"));
  CHECK(Tree(rig.fw) == Paths{"shared.bin"});
  CHECK(Read(rig.fw + "/shared.bin") == "A");
  CHECK(Read(rig.ledger) == ledger_before);
  CHECK(stager.List().size() == before.size());
}

TEST_CASE("staging again replaces the owner's set of files") {
  Rig rig;
  Stager stager = rig.Open();
  const std::string v1 = rig.Image("v1", {{"d/y.bin", "2"}, {"x.bin", "1"}});
  REQUIRE(stager.Stage("ns/a", v1).ok());
  const std::string ledger_v1 = Read(rig.ledger);
  REQUIRE(stager.Stage("ns/a", v1).ok());
  CHECK(Read(rig.ledger) == ledger_v1);  // idempotent
  CHECK(Tree(rig.fw) == Paths{"d", "d/y.bin", "x.bin"});

  auto staged = stager.Stage("ns/a", rig.Image("v2", {{"x.bin", "1b"}, {"z.bin", "3"}}));
  REQUIRE(staged.ok());
  CHECK(*staged == Paths{"x.bin", "z.bin"});
  CHECK(Read(rig.fw + "/x.bin") == "1b");
  CHECK(Tree(rig.fw) == Paths{"x.bin", "z.bin"});
  const auto list = stager.List();
  REQUIRE(list.size() == 2);
  CHECK(list[0].size == 2);
  CHECK(list[1].owners == Paths{"ns/a"});
}

TEST_CASE("a symlink or a FIFO in an image is rejected by name") {
  Rig rig;
  Stager stager = rig.Open();
  SECTION("symlink") {
    const std::string img = rig.Image("a", {{"ok.bin", "1"}});
    fs::create_symlink("/etc/passwd", img + "/passwd.bin");
    auto staged = stager.Stage("ns/a", img);
    REQUIRE_FALSE(staged.ok());
    CHECK(absl::IsInvalidArgument(staged.status()));
    CHECK_THAT(Message(staged.status()),
               Catch::Contains("passwd.bin") && Catch::Contains("symbolic link"));
  }
  SECTION("symlinked directory") {
    const std::string img = rig.Image("a", {{"ok.bin", "1"}});
    fs::create_directory_symlink("/etc", img + "/etc");
    auto staged = stager.Stage("ns/a", img);
    REQUIRE_FALSE(staged.ok());
    CHECK_THAT(Message(staged.status()), Catch::Contains("/etc: is a symbolic link"));
  }
  SECTION("FIFO") {
    const std::string img = rig.Image("a", {{"ok.bin", "1"}});
    REQUIRE(mkfifo((img + "/pipe.bin").c_str(), 0644) == 0);
    auto staged = stager.Stage("ns/a", img);
    REQUIRE_FALSE(staged.ok());
    CHECK_THAT(Message(staged.status()), Catch::Contains("pipe.bin") && Catch::Contains("FIFO"));
  }
  CHECK(Tree(rig.fw).empty());
  CHECK(stager.List().empty());
}

TEST_CASE("a symlink planted in the firmware directory is refused and nothing is written outside") {
  Rig rig;
  Stager stager = rig.Open();
  const std::string outside = rig.root + "/outside";
  fs::create_directories(outside);
  fs::create_directories(rig.fw);
  SECTION("as a directory on the way") {
    fs::create_directory_symlink(outside, rig.fw + "/kmm_ci_fw");
    auto staged = stager.Stage("ns/a", rig.Image("a", {{"kmm_ci_fw/fw.bin", "FW"}}));
    REQUIRE_FALSE(staged.ok());
    CHECK(absl::IsFailedPrecondition(staged.status()));
    CHECK_THAT(Message(staged.status()), Catch::Contains("kmm_ci_fw: is a symbolic link"));
  }
  SECTION("as the file itself") {
    Put(outside + "/target", "host file");
    fs::create_symlink(outside + "/target", rig.fw + "/fw.bin");
    auto staged = stager.Stage("ns/a", rig.Image("a", {{"fw.bin", "FW"}}));
    REQUIRE_FALSE(staged.ok());
    CHECK_THAT(Message(staged.status()), Catch::Contains("fw.bin: is a symbolic link"));
    CHECK(Read(outside + "/target") == "host file");
  }
  CHECK(Tree(outside) == (Exists(outside + "/target") ? Paths{"target"} : Paths{}));
  CHECK(stager.List().empty());
}

TEST_CASE("a path leaving the firmware directory can come neither from an image nor a ledger") {
  using kmodd::firmware::CheckRelativePath;
  for (const char* bad : {"../x.bin", "a/../../x.bin", "a/..", "..", "/etc/passwd", "a//b", "./a",
                          "a/", "", "a\nb", "a/.b.kmodd-new"}) {
    CAPTURE(bad);
    CHECK(absl::IsInvalidArgument(CheckRelativePath(bad)));
  }
  CHECK(CheckRelativePath("kmm_ci_fw/fw.bin").ok());
  CHECK(CheckRelativePath("..hidden/x..y.bin").ok());

  Rig rig;
  {
    Stager stager = rig.Open();
    auto staged = stager.Stage("ns/a", rig.Image("a", {{"..fw.bin", "1"}}));
    REQUIRE(staged.ok());
    CHECK(Read(rig.fw + "/..fw.bin") == "1");
  }
  Put(rig.ledger, absl::StrCat(R"({"version": 1, "firmwareDir": ")", rig.fw,
                               R"(", "files": [{"path": "../escape.bin", )", IdentityJson("1"),
                               R"(, "owners": ["ns/a"], "foreign": false}],)",
                               R"( "createdDirs": [], "pending": []})"));
  auto reopened = Stager::Open(rig.Options());
  REQUIRE_FALSE(reopened.ok());
  CHECK(absl::IsDataLoss(reopened.status()));
  CHECK_THAT(Message(reopened.status()), Catch::Contains(rig.ledger) && Catch::Contains(".."));
}

TEST_CASE("a file kmodd did not stage is never overwritten, and kept when identical") {
  Rig rig;
  Stager stager = rig.Open();
  Put(rig.fw + "/pre.bin", "theirs");
  SECTION("different content is a conflict") {
    auto staged = stager.Stage("ns/a", rig.Image("a", {{"pre.bin", "ours"}}));
    REQUIRE_FALSE(staged.ok());
    CHECK(absl::IsFailedPrecondition(staged.status()));
    CHECK_THAT(Message(staged.status()),
               Catch::Contains("pre.bin") && Catch::Contains("did not stage"));
    CHECK(Read(rig.fw + "/pre.bin") == "theirs");
    CHECK(stager.List().empty());
  }
  SECTION("identical content is shared as foreign and survives the release") {
    REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"pre.bin", "theirs"}})).ok());
    REQUIRE(stager.List().size() == 1);
    CHECK(stager.List()[0].foreign);
    // Still the host's file: an owner cannot change it.
    auto changed = stager.Stage("ns/a", rig.Image("a2", {{"pre.bin", "changed"}}));
    CHECK(absl::IsFailedPrecondition(changed.status()));
    REQUIRE(stager.Release("ns/a").ok());
    CHECK(Read(rig.fw + "/pre.bin") == "theirs");
    CHECK(stager.List().empty());
  }
}

TEST_CASE("firmware_class.path names the firmware directory while kmodd owns files") {
  Rig rig;
  Put(rig.param, "/opt/vendor-fw\n");  // sysfs reads back with a newline
  Stager stager = rig.Open(/*with_param=*/true);
  REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"a.bin", "1"}})).ok());
  CHECK(Read(rig.param) == rig.fw);  // written as is: older kernels keep a newline in the path
  REQUIRE(stager.Stage("ns/b", rig.Image("b", {{"b.bin", "2"}})).ok());
  REQUIRE(stager.Release("ns/a").ok());
  CHECK(Read(rig.param) == rig.fw);
  REQUIRE(stager.Release("ns/b").ok());
  CHECK(Read(rig.param) == "/opt/vendor-fw");
  REQUIRE(stager.Release("ns/b").ok());
  CHECK(Read(rig.param) == "/opt/vendor-fw");
}

TEST_CASE("an empty firmware_class.path is restored as empty") {
  Rig rig;
  Put(rig.param, "\n");
  Stager stager = rig.Open(/*with_param=*/true);
  REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"a.bin", "1"}})).ok());
  CHECK(Read(rig.param) == rig.fw);
  REQUIRE(stager.Release("ns/a").ok());
  // One NUL byte: sysfs ignores an empty write, and the kernel reads "\n" as a path.
  CHECK(Read(rig.param) == std::string(1, '\0'));
}

TEST_CASE("firmware_class.path already naming the firmware directory is left as it was") {
  Rig rig;
  Put(rig.param, rig.fw + "\n");
  Stager stager = rig.Open(/*with_param=*/true);
  REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"a.bin", "1"}})).ok());
  CHECK(Read(rig.param) == rig.fw + "\n");
  REQUIRE(stager.Release("ns/a").ok());
  CHECK(Read(rig.param) == rig.fw + "\n");
}

TEST_CASE("firmware_class.path is not touched when no parameter file is configured") {
  Rig rig;
  Put(rig.param, "/opt/vendor-fw\n");
  Stager stager = rig.Open(/*with_param=*/false);
  REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"a.bin", "1"}})).ok());
  CHECK(Read(rig.param) == "/opt/vendor-fw\n");
  REQUIRE(stager.Release("ns/a").ok());
  CHECK(Read(rig.param) == "/opt/vendor-fw\n");
}

TEST_CASE("the ledger survives reopening") {
  Rig rig;
  {
    Stager stager = rig.Open();
    REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"fw/s.bin", "S"}})).ok());
    REQUIRE(stager.Stage("ns/b", rig.Image("b", {{"fw/s.bin", "S"}, {"fw/b.bin", "B"}})).ok());
  }
  Stager stager = rig.Open();
  const auto list = stager.List();
  REQUIRE(list.size() == 2);
  CHECK(list[0].path == "fw/b.bin");
  CHECK(list[1].owners == Paths{"ns/a", "ns/b"});
  REQUIRE(stager.Release("ns/b").ok());
  CHECK(Tree(rig.fw) == Paths{"fw", "fw/s.bin"});
}

TEST_CASE("a second stager on the same ledger is refused while the first is open") {
  Rig rig;
  Stager first = rig.Open();
  auto second = Stager::Open(rig.Options());
  REQUIRE_FALSE(second.ok());
  CHECK(absl::IsUnavailable(second.status()));
}

TEST_CASE("a corrupt ledger is an error naming it and is left for a person to look at") {
  Rig rig;
  for (const std::string& text :
       {std::string("{\"version\": 1, \"files\": [ oops"), std::string(""),
        absl::StrCat(R"({"version": 2, "firmwareDir": ")", rig.fw,
                     R"(", "files": [], "createdDirs": [], "pending": []})")}) {
    CAPTURE(text);
    Put(rig.ledger, text);
    auto stager = Stager::Open(rig.Options());
    REQUIRE_FALSE(stager.ok());
    CHECK(absl::IsDataLoss(stager.status()));
    CHECK_THAT(Message(stager.status()), Catch::Contains(rig.ledger));
    CHECK(Read(rig.ledger) == text);
  }
}

TEST_CASE("a ledger for another firmware directory is refused while it owns files") {
  Rig rig;
  {
    Stager stager = rig.Open();
    REQUIRE(stager.Stage("ns/a", rig.Image("a", {{"a.bin", "1"}})).ok());
  }
  StagerOptions moved = rig.Options();
  moved.firmware_dir = rig.root + "/elsewhere";
  auto stager = Stager::Open(moved);
  REQUIRE_FALSE(stager.ok());
  CHECK(absl::IsFailedPrecondition(stager.status()));
}

TEST_CASE("what a crash left undecided is settled when the ledger is opened again") {
  Rig rig;
  // A Stage that wrote new/orphan.bin and was updating upd.bin, then a crash before its
  // commit; other.bin was replaced by someone else since.
  Put(rig.fw + "/new/orphan.bin", "orphan");
  Put(rig.fw + "/new/.orphan.bin.kmodd-new", "partial");
  Put(rig.fw + "/upd.bin", "new");
  Put(rig.fw + "/.upd.bin.kmodd-old", "old");
  Put(rig.fw + "/other.bin", "someone else's");
  Put(rig.fw + "/unrelated.bin", "host");
  Put(rig.ledger,
      absl::StrCat(R"({"version": 1, "firmwareDir": ")", rig.fw, R"(", "files": [)",
                   R"({"path": "upd.bin", )", IdentityJson("old"),
                   R"(, "owners": ["ns/a"], "foreign": false}], "createdDirs": ["new"], )",
                   R"("pending": [{"path": "new/orphan.bin", )", IdentityJson("orphan"), "}, ",
                   R"({"path": "upd.bin", )", IdentityJson("new"), "}, ",
                   R"({"path": "other.bin", )", IdentityJson("mine"), "}]}"));
  Stager stager = rig.Open();
  CHECK(Tree(rig.fw) == Paths{"other.bin", "unrelated.bin", "upd.bin"});
  CHECK(Read(rig.fw + "/upd.bin") == "old");
  CHECK(Read(rig.fw + "/other.bin") == "someone else's");
  REQUIRE(stager.List().size() == 1);
  CHECK(Read(rig.ledger).find("orphan") == std::string::npos);
}

TEST_CASE("a Stage that fails while renaming puts every previous file back") {
  Rig rig;
  Stager stager = rig.Open();
  REQUIRE(stager.Stage("ns/a", rig.Image("v1", {{"a.bin", "1"}, {"z.bin", "Z1"}})).ok());
  const std::string ledger_v1 = Read(rig.ledger);
  // A directory under the name kmodd keeps z.bin's old content in makes the last step fail,
  // after a.bin was replaced and b/new.bin created.
  fs::create_directories(rig.fw + "/.z.bin.kmodd-old");
  const std::string v2 = rig.Image("v2", {{"a.bin", "2"}, {"b/new.bin", "N"}, {"z.bin", "Z2"}});
  auto staged = stager.Stage("ns/a", v2);
  REQUIRE_FALSE(staged.ok());
  CHECK_THAT(Message(staged.status()), Catch::Contains(".z.bin.kmodd-old"));
  CHECK(Tree(rig.fw) == Paths{".z.bin.kmodd-old", "a.bin", "z.bin"});
  CHECK(Read(rig.fw + "/a.bin") == "1");
  CHECK(Read(rig.fw + "/z.bin") == "Z1");
  CHECK(Read(rig.ledger) == ledger_v1);

  fs::remove(rig.fw + "/.z.bin.kmodd-old");
  REQUIRE(stager.Stage("ns/a", v2).ok());
  CHECK(Tree(rig.fw) == Paths{"a.bin", "b", "b/new.bin", "z.bin"});
  CHECK(Read(rig.fw + "/z.bin") == "Z2");
}
