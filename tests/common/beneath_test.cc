// The one walk beneath a root (common/beneath.h). Every hostile case runs through both
// resolvers, openat2 and the O_NOFOLLOW walk: both refuse it the same way, and nothing
// outside the root is read, created or changed.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/beneath.h"
#include "tests/temp_dir.h"

namespace fs = std::filesystem;
using kmodd::ActiveResolver;
using kmodd::DirWalk;
using kmodd::Fd;
using kmodd::Resolver;
using kmodd::ScopedResolverForTesting;

namespace {

const char* NameOf(Resolver r) { return r == Resolver::kOpenat2 ? "openat2" : "walk"; }

void Put(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  REQUIRE(out.good());
}

std::string ReadFd(const Fd& fd) {
  std::string out(256, '\0');
  const ssize_t n = pread(fd.get(), out.data(), out.size(), 0);
  REQUIRE(n >= 0);
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// Every entry below `dir`, relative, sorted, symlinks not followed.
std::vector<std::string> Tree(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    out.push_back(e.path().lexically_relative(dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A root and, beside it, what a hostile path would like to reach: "outside/secret".
struct Rig {
  Rig() {
    REQUIRE(!tmp.path.empty());
    root = tmp.path + "/root";
    outside = tmp.path + "/outside";
    fs::create_directories(root);
    fs::create_directories(outside);
    Put(outside + "/secret", "secret");
    auto opened = kmodd::OpenRoot(root);
    REQUIRE(opened.ok());
    root_fd = *std::move(opened);
  }
  // Nothing outside the root was created, removed or changed.
  void CheckOutsideUntouched() const {
    CHECK(Tree(outside) == std::vector<std::string>{"secret"});
    std::ifstream in(outside + "/secret");
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str() == "secret");
  }
  std::string P(const std::string& rel) const { return root + "/" + rel; }

  kmodd::testing::TempDir tmp{"beneath"};
  std::string root, outside;
  Fd root_fd;
};

void Symlink(const std::string& target, const std::string& link) {
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
}
void Mkdir(const std::string& path) { REQUIRE(mkdir(path.c_str(), 0755) == 0); }
void Mkfifo(const std::string& path) { REQUIRE(mkfifo(path.c_str(), 0644) == 0); }
void BindSocket(const std::string& path) {
  const int s = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(s >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  REQUIRE(bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  close(s);
}

// A directory path that meets something other than a real directory on the way.
struct DirCase {
  std::string name;
  std::function<void(const Rig&)> plant;
  std::string rel;
  DirWalk::End end;
  std::string at;      // where the walk ends
  std::string error;   // ProbeDir's and MakeDirs' message after "<root>/<at>: "
  int kernel_errno;    // what openat2 alone says
};

std::vector<DirCase> DirCases() {
  const std::string link_error = "is a symbolic link; refusing to follow it";
  std::vector<DirCase> c;
  c.push_back({"a symlink in the middle",
               [](const Rig& r) {
                 Mkdir(r.P("a"));
                 Symlink(r.outside, r.P("a/link"));
               },
               "a/link/b", DirWalk::kSymlink, "a/link", link_error, ELOOP});
    // At the end, O_NOFOLLOW | O_DIRECTORY meets the symlink first: ENOTDIR, not ELOOP.
  c.push_back({"a symlink at the end", [](const Rig& r) { Symlink(r.outside, r.P("link")); },
               "link", DirWalk::kSymlink, "link", link_error, ENOTDIR});
  c.push_back({"a relative symlink climbing out",
               [](const Rig& r) {
                 Mkdir(r.P("a"));
                 Symlink("../../outside", r.P("a/up"));
               },
               "a/up", DirWalk::kSymlink, "a/up", link_error, ENOTDIR});
  c.push_back({"a symlink to a directory inside the root",
               [](const Rig& r) {
                 Mkdir(r.P("real"));
                 Symlink("real", r.P("alias"));
               },
               "alias/x", DirWalk::kSymlink, "alias", link_error, ELOOP});
  c.push_back({"a magic link", [](const Rig& r) { Symlink("/proc/self/root", r.P("proc")); },
               "proc/etc", DirWalk::kSymlink, "proc", link_error, ELOOP});
  c.push_back({"a regular file on the way", [](const Rig& r) { Put(r.P("f"), "x"); }, "f/x",
               DirWalk::kNotDirectory, "f", "is not a directory", ENOTDIR});
  c.push_back({"a fifo on the way", [](const Rig& r) { Mkfifo(r.P("p")); }, "p/x",
               DirWalk::kNotDirectory, "p", "is not a directory", ENOTDIR});
  return c;
}

// A path that is not names only.
struct BadPath {
  std::string name;
  std::string rel;
  int kernel_errno;  // what openat2 alone says: 0 where the kernel would allow it
};

std::vector<BadPath> BadPaths() {
  return {
      {"'..'", "..", EXDEV},
      {"'..' to a sibling", "../outside", EXDEV},
      {"'..' after a name", "a/../../outside", EXDEV},
      {"'..' that stays inside", "a/../a", 0},
      {"'.'", "./a", 0},
      {"an absolute path", "/etc", EXDEV},
      {"the absolute root", "/", EXDEV},
      {"a NUL byte", std::string("a\0/../..", 8), 0},
  };
}

// Where a regular file is expected.
struct FileCase {
  std::string name;
  std::function<void(const Rig&)> plant;
  std::string rel;
  std::string error;  // after "<root>/"
};

std::vector<FileCase> FileCases() {
  std::vector<FileCase> c;
  c.push_back({"a symlink to a file outside",
               [](const Rig& r) { Symlink(r.outside + "/secret", r.P("fw.bin")); }, "fw.bin",
               "fw.bin: is a symbolic link; refusing to follow it"});
  c.push_back({"a symlink to a file inside",
               [](const Rig& r) {
                 Put(r.P("real.bin"), "x");
                 Symlink("real.bin", r.P("fw.bin"));
               },
               "fw.bin", "fw.bin: is a symbolic link; refusing to follow it"});
  c.push_back({"a file beneath a symlinked directory",
               [](const Rig& r) { Symlink(r.outside, r.P("dir")); }, "dir/secret",
               "dir: is a symbolic link; refusing to follow it"});
  c.push_back({"a fifo (opening it would block)", [](const Rig& r) { Mkfifo(r.P("fw.bin")); },
               "fw.bin", "fw.bin: is not a regular file"});
  c.push_back({"a socket", [](const Rig& r) { BindSocket(r.P("fw.bin")); }, "fw.bin",
               "fw.bin: is not a regular file"});
  c.push_back({"a directory", [](const Rig& r) { Mkdir(r.P("fw.bin")); }, "fw.bin",
               "fw.bin: is not a regular file"});
  return c;
}

}  // namespace

TEST_CASE("the kernel under test has openat2, so the openat2 half of every table is openat2") {
  // Fails on a kernel older than 5.6 or under a seccomp filter that hides openat2: the tables
  // below would then run the walk twice and prove nothing about openat2.
  CHECK(ActiveResolver() == Resolver::kOpenat2);
  {
    ScopedResolverForTesting walk(Resolver::kWalk);
    CHECK(ActiveResolver() == Resolver::kWalk);
  }
  CHECK(ActiveResolver() == Resolver::kOpenat2);
}

TEST_CASE("a directory path through a symlink or a non-directory is refused where it turns") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  for (const DirCase& c : DirCases()) {
    INFO(NameOf(resolver) << ": " << c.name);
    Rig rig;
    c.plant(rig);
    const std::vector<std::string> before = Tree(rig.root);

    auto walk = kmodd::WalkDir(rig.root_fd, rig.root, c.rel);
    REQUIRE(walk.ok());
    CHECK(walk->end == c.end);
    CHECK(walk->at == c.at);
    CHECK(!walk->dir.valid());

    const std::string expected = rig.P(c.at) + ": " + c.error;
    auto probe = kmodd::ProbeDir(rig.root_fd, rig.root, c.rel);
    CHECK(absl::IsFailedPrecondition(probe.status()));
    CHECK(Message(probe.status()) == expected);
    auto made = kmodd::MakeDirs(rig.root_fd, rig.root, c.rel);
    CHECK(absl::IsFailedPrecondition(made.status()));
    CHECK(Message(made.status()) == expected);
    auto created = kmodd::WalkDirCreating(rig.root_fd, rig.root, c.rel, 0755);
    REQUIRE(created.ok());
    CHECK(created->end == c.end);

    // The kernel refuses it by itself too.
    const int fd = kmodd::internal::Openat2Dir(rig.root_fd.get(), c.rel);
    CHECK(fd == -c.kernel_errno);
    if (fd >= 0) {
      close(fd);
    }
    CHECK(Tree(rig.root) == before);
    rig.CheckOutsideUntouched();
  }
}

TEST_CASE("a path that is not names only is refused before anything is opened") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  for (const BadPath& c : BadPaths()) {
    INFO(NameOf(resolver) << ": " << c.name);
    Rig rig;
    Mkdir(rig.P("a"));

    CHECK(absl::IsInvalidArgument(kmodd::WalkDir(rig.root_fd, rig.root, c.rel).status()));
    CHECK(absl::IsInvalidArgument(
        kmodd::WalkDirCreating(rig.root_fd, rig.root, c.rel, 0755).status()));
    CHECK(absl::IsInvalidArgument(kmodd::ProbeDir(rig.root_fd, rig.root, c.rel).status()));
    CHECK(absl::IsInvalidArgument(kmodd::MakeDirs(rig.root_fd, rig.root, c.rel).status()));
    CHECK(absl::IsInvalidArgument(
        kmodd::MakeDirs(rig.root_fd, rig.root, c.rel + "/new").status()));
    CHECK(absl::IsInvalidArgument(
        kmodd::OpenRegularBeneath(rig.root_fd, rig.root, c.rel + "/secret").status()));
    CHECK_THAT(Message(kmodd::MakeDirs(rig.root_fd, rig.root, c.rel).status()),
               Catch::Contains("a path beneath a root is names only"));
    if (c.kernel_errno != 0) {
      const int fd = kmodd::internal::Openat2Dir(rig.root_fd.get(), c.rel);
      CHECK(fd == -c.kernel_errno);
      if (fd >= 0) {
        close(fd);
      }
    }
    CHECK(Tree(rig.root) == std::vector<std::string>{"a"});
    rig.CheckOutsideUntouched();
  }
}

TEST_CASE("where a regular file is expected, anything else is refused without opening it") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  for (const FileCase& c : FileCases()) {
    INFO(NameOf(resolver) << ": " << c.name);
    Rig rig;
    c.plant(rig);
    auto file = kmodd::OpenRegularBeneath(rig.root_fd, rig.root, c.rel);
    CHECK(absl::IsFailedPrecondition(file.status()));
    CHECK(Message(file.status()) == rig.P(c.error));
    rig.CheckOutsideUntouched();
  }
  SECTION("a regular file is opened, an absent one is nullopt") {
    Rig rig;
    Mkdir(rig.P("d"));
    Put(rig.P("d/fw.bin"), "firmware");
    auto file = kmodd::OpenRegularBeneath(rig.root_fd, rig.root, "d/fw.bin");
    REQUIRE(file.ok());
    REQUIRE(file->has_value());
    CHECK(ReadFd(**file) == "firmware");
    for (const char* absent : {"d/none.bin", "none/fw.bin"}) {
      auto none = kmodd::OpenRegularBeneath(rig.root_fd, rig.root, absent);
      REQUIRE(none.ok());
      CHECK(!none->has_value());
    }
  }
}

// Devices from the real /dev: making one needs CAP_MKNOD, and the unit tests run without it.
TEST_CASE("a device node is neither a directory on the way nor a regular file") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  auto dev = kmodd::OpenRoot("/dev");
  REQUIRE(dev.ok());
  struct stat st {};
  REQUIRE(lstat("/dev/null", &st) == 0);
  REQUIRE(S_ISCHR(st.st_mode));

  auto walk = kmodd::WalkDir(*dev, "/dev", "null/x");
  REQUIRE(walk.ok());
  CHECK(walk->end == DirWalk::kNotDirectory);
  CHECK(walk->at == "null");
  CHECK(Message(kmodd::MakeDirs(*dev, "/dev", "null/x").status()) ==
        "/dev/null: is not a directory");
  CHECK(kmodd::internal::Openat2Dir(dev->get(), "null/x") == -ENOTDIR);
  auto file = kmodd::OpenRegularBeneath(*dev, "/dev", "null");
  CHECK(absl::IsFailedPrecondition(file.status()));
  CHECK(Message(file.status()) == "/dev/null: is not a regular file");
}

TEST_CASE("missing directories are reported outermost first and made with their exact mode") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  Rig rig;
  Mkdir(rig.P("a"));

  auto walk = kmodd::WalkDir(rig.root_fd, rig.root, "a/b/c");
  REQUIRE(walk.ok());
  CHECK(walk->end == DirWalk::kAbsent);
  CHECK(walk->at == "a/b");
  CHECK(walk->depth == 1);
  auto probe = kmodd::ProbeDir(rig.root_fd, rig.root, "a/b/c");
  REQUIRE(probe.ok());
  CHECK(!probe->dir.has_value());
  CHECK(probe->missing == std::vector<std::string>{"a/b", "a/b/c"});

  const mode_t old_umask = umask(077);
  auto made = kmodd::MakeDirs(rig.root_fd, rig.root, "a//b/c/");
  umask(old_umask);
  REQUIRE(made.ok());
  for (const char* dir : {"a/b", "a/b/c"}) {
    struct stat st {};
    REQUIRE(lstat(rig.P(dir).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
  }
  auto again = kmodd::ProbeDir(rig.root_fd, rig.root, "a/b/c");
  REQUIRE(again.ok());
  CHECK(again->dir.has_value());
  auto root_itself = kmodd::ProbeDir(rig.root_fd, rig.root, "");
  REQUIRE(root_itself.ok());
  CHECK(root_itself->dir.has_value());
}

TEST_CASE("a directory replaced by a symlink between two calls redirects neither") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  Rig rig;
  auto dir = kmodd::MakeDirs(rig.root_fd, rig.root, "a/b");
  REQUIRE(dir.ok());

  fs::rename(rig.P("a"), rig.P("a.moved"));
  Symlink(rig.outside, rig.P("a"));

  // The descriptor from the first call still names the real directory, wherever it went.
  const int fd =
      openat(dir->get(), "x", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  close(fd);
  CHECK(fs::exists(rig.P("a.moved/b/x")));
  // The second call sees the symlink and refuses it.
  const std::string refused = rig.P("a") + ": is a symbolic link; refusing to follow it";
  CHECK(Message(kmodd::MakeDirs(rig.root_fd, rig.root, "a/b").status()) == refused);
  CHECK(Message(kmodd::ProbeDir(rig.root_fd, rig.root, "a/b").status()) == refused);
  CHECK(Message(kmodd::OpenRegularBeneath(rig.root_fd, rig.root, "a/secret").status()) ==
        refused);
  rig.CheckOutsideUntouched();
}

TEST_CASE("a directory swapped with a symlink while paths are walked never lets a walk out") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  Rig rig;
  Mkdir(rig.P("a"));
  Mkdir(rig.P("a/sub"));
  Symlink(rig.outside, rig.P("swap"));
  struct stat real {};
  REQUIRE(stat(rig.P("a/sub").c_str(), &real) == 0);

  // "a" is the real directory and the symlink to outside/ in turn, atomically.
  std::atomic<bool> stop{false};
  std::atomic<int> swap_errno{0};
  std::thread swapper([&] {
    while (!stop.load()) {
      if (renameat2(rig.root_fd.get(), "a", rig.root_fd.get(), "swap", RENAME_EXCHANGE) != 0) {
        swap_errno = errno;
        return;
      }
    }
  });
  int opened = 0;
  int refused = 0;
  for (int i = 0; i < 200000 && (i < 2000 || opened == 0 || refused == 0); ++i) {
    auto dir = kmodd::MakeDirs(rig.root_fd, rig.root, "a/sub");
    if (dir.ok()) {
      struct stat st {};
      REQUIRE(fstat(dir->get(), &st) == 0);
      REQUIRE((st.st_dev == real.st_dev && st.st_ino == real.st_ino));
      ++opened;
    } else {
      // Which refusal depends on when the swap lands: the symlink met, or the open refused
      // and the directory back by the time the walk looked why.
      REQUIRE(absl::IsFailedPrecondition(dir.status()));
      REQUIRE_THAT(Message(dir.status()), Catch::StartsWith(rig.P("a") + ": is "));
      ++refused;
    }
  }
  stop = true;
  swapper.join();
  INFO("opened " << opened << ", refused " << refused);
  CHECK(swap_errno == 0);
  CHECK(opened > 0);
  CHECK(refused > 0);
  rig.CheckOutsideUntouched();
}

TEST_CASE("paths deeper than PATH_MAX are walked, and refused where they turn") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  Rig rig;
  std::string deep;
  std::vector<std::string> prefixes;
  for (int i = 0; i < 40; ++i) {
    deep = kmodd::JoinPath(deep, std::string(119, 'a') + std::to_string(i % 10));
    prefixes.push_back(deep);
  }
  REQUIRE(deep.size() > PATH_MAX);
  // Removed through the library: std::filesystem cannot name paths this long.
  struct Cleanup {
    const Fd& root;
    std::string top;
    ~Cleanup() { (void)kmodd::RemoveBeneath(root, top, top); }
  } cleanup{rig.root_fd, prefixes[0]};

  auto made = kmodd::MakeDirs(rig.root_fd, rig.root, deep);
  REQUIRE(made.ok());
  const int fd = openat(made->get(), "deep.bin", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "bottom", 6) == 6);
  close(fd);
  // openat2 alone cannot take the path: the walk is what opens it.
  CHECK(kmodd::internal::Openat2Dir(rig.root_fd.get(), deep) == -ENAMETOOLONG);
  auto walk = kmodd::WalkDir(rig.root_fd, rig.root, deep);
  REQUIRE(walk.ok());
  CHECK(walk->end == DirWalk::kOpened);
  CHECK(walk->depth == 40);
  auto file = kmodd::OpenRegularBeneath(rig.root_fd, rig.root, deep + "/deep.bin");
  REQUIRE(file.ok());
  REQUIRE(file->has_value());
  CHECK(ReadFd(**file) == "bottom");

  // A symlink planted halfway down, by its parent's descriptor (the path is too long to name).
  auto parent = kmodd::MakeDirs(rig.root_fd, rig.root, prefixes[18]);
  REQUIRE(parent.ok());
  const std::string name = kmodd::SplitParent(prefixes[19]).second;
  REQUIRE(renameat(parent->get(), name.c_str(), parent->get(), "moved") == 0);
  REQUIRE(symlinkat(rig.outside.c_str(), parent->get(), name.c_str()) == 0);
  auto refused = kmodd::WalkDir(rig.root_fd, rig.root, deep);
  REQUIRE(refused.ok());
  CHECK(refused->end == DirWalk::kSymlink);
  CHECK(refused->at == prefixes[19]);
  CHECK(refused->depth == 19);
  CHECK(absl::IsFailedPrecondition(kmodd::MakeDirs(rig.root_fd, rig.root, deep).status()));
  rig.CheckOutsideUntouched();

  REQUIRE(kmodd::RemoveBeneath(rig.root_fd, prefixes[0], prefixes[0]).ok());
  CHECK(Tree(rig.root).empty());
  rig.CheckOutsideUntouched();
}

TEST_CASE("hundreds of components within PATH_MAX resolve in one openat2 call or the walk") {
  const Resolver resolver = GENERATE(Resolver::kOpenat2, Resolver::kWalk);
  ScopedResolverForTesting scope(resolver);
  REQUIRE(ActiveResolver() == resolver);
  Rig rig;
  std::string deep = "d";
  for (int i = 1; i < 200; ++i) {
    deep += "/d";
  }
  auto made = kmodd::MakeDirs(rig.root_fd, rig.root, deep);
  REQUIRE(made.ok());
  const int fd = kmodd::internal::Openat2Dir(rig.root_fd.get(), deep);
  CHECK(fd >= 0);
  if (fd >= 0) {
    close(fd);
  }
  auto walk = kmodd::WalkDir(rig.root_fd, rig.root, deep);
  REQUIRE(walk.ok());
  CHECK(walk->end == DirWalk::kOpened);
  CHECK(walk->depth == 200);
  REQUIRE(kmodd::RemoveBeneath(rig.root_fd, "d", "d").ok());
  CHECK(Tree(rig.root).empty());
}

TEST_CASE("removing and pruning act on a symlink itself, never on what it points to") {
  Rig rig;
  Symlink(rig.outside, rig.P("link"));
  Mkdir(rig.P("keep"));
  Put(rig.P("keep/x"), "x");
  Mkdir(rig.P("drop"));
  Put(rig.P("drop/y"), "y");

  SECTION("a kept symlink to a directory is not descended into") {
    // Were it followed, "link/secret" would be pruned: it is not kept.
    REQUIRE(kmodd::PruneDir(rig.root_fd, "", [](const std::string& p) {
                              return p == "link" || p == "keep" || p == "keep/x";
                            }).ok());
    CHECK(Tree(rig.root) == std::vector<std::string>{"keep", "keep/x", "link"});
  }
  SECTION("removing a symlink to a directory removes the link") {
    REQUIRE(kmodd::RemoveBeneath(rig.root_fd, "link", "link").ok());
    REQUIRE(kmodd::RemoveBeneath(rig.root_fd, "drop", "drop").ok());
    REQUIRE(kmodd::RemoveBeneath(rig.root_fd, "absent", "absent").ok());
    CHECK(Tree(rig.root) == std::vector<std::string>{"keep", "keep/x"});
  }
  rig.CheckOutsideUntouched();
}

TEST_CASE("functions that take a directory and a name refuse a path for the name") {
  Rig rig;
  Symlink(rig.outside, rig.P("link"));
  for (const std::string name : {"link/secret", "..", ".", "", "../outside"}) {
    INFO(name);
    CHECK(absl::IsInvalidArgument(kmodd::KindOf(rig.root_fd, name, name).status()));
    CHECK(absl::IsInvalidArgument(kmodd::RemoveBeneath(rig.root_fd, name, name)));
    CHECK(absl::IsInvalidArgument(kmodd::OpenRegular(rig.root_fd, name, name).status()));
  }
  rig.CheckOutsideUntouched();
}

TEST_CASE("paths split and join by their components") {
  using kmodd::Components;
  using kmodd::DirPrefixes;
  using kmodd::JoinPath;
  using kmodd::SplitParent;
  CHECK(Components("a//b/") == std::vector<std::string_view>{"a", "b"});
  CHECK(Components("").empty());
  CHECK(SplitParent("a/b/c") == std::pair<std::string, std::string>{"a/b", "c"});
  CHECK(SplitParent("c") == std::pair<std::string, std::string>{"", "c"});
  CHECK(DirPrefixes("a/b") == std::vector<std::string>{"a", "a/b"});
  CHECK(DirPrefixes("").empty());
  CHECK(JoinPath("/lib/firmware", "a/b") == "/lib/firmware/a/b");
  CHECK(JoinPath("/lib/firmware/", "a") == "/lib/firmware/a");
  CHECK(JoinPath("", "a/b") == "a/b");
  CHECK(JoinPath("root", "") == "root");
}
