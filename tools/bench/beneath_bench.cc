// common/beneath.h: openat2 against the O_NOFOLLOW walk, side by side in one run, on the
// calls the agent makes most: MakeDirs of a directory that exists (each directory change
// while a layer is extracted, each file staged), OpenRegularBeneath of a file (each firmware
// file planned), and WalkDir of a path whose last directory is absent (where openat2 fails
// and the walk runs after it: the fallback's cost). Prints, for each resolver, the median
// over the runs of the mean time per call in a run, and their ratio.
//
//   taskset -c 0 build/bin/beneath_bench [--depth N] [--runs R] [--calls C] [--dir D]

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/beneath.h"
#include "common/flags.h"

namespace {

using Clock = std::chrono::steady_clock;

bool Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "beneath_bench: %s failed\n", what);
  }
  return ok;
}

// Nanoseconds per call of `call` over `calls` calls, under `resolver`.
double NsPerCall(kmodd::Resolver resolver, int calls, const std::function<bool()>& call) {
  kmodd::ScopedResolverForTesting scope(resolver);
  if (!Check(kmodd::ActiveResolver() == resolver, "choosing the resolver")) {
    std::exit(1);
  }
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) {
    if (!call()) {
      std::exit(1);
    }
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / calls;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int depth = 10;
  int runs = 21;
  int calls = 2000;
  std::string dir = "/tmp";
  kmodd::flags::FlagSet flags(
      "beneath_bench", "usage: beneath_bench [--depth N] [--runs R] [--calls C] [--dir D]\n");
  flags.Int("--depth", "N", "directories below the root (default 10)", &depth, {1});
  flags.Int("--runs", "R", "runs, of which the median is printed (default 21)", &runs, {1});
  flags.Int("--calls", "C", "calls per run (default 2000)", &calls, {1});
  flags.String("--dir", "D", "where the tree is made (default /tmp)", &dir);
  if (std::optional<int> exit =
          flags.ParseOrExit(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr)) {
    return *exit;
  }
  std::string tmpl = dir + "/kmodd-beneath-bench-XXXXXX";
  if (!Check(mkdtemp(tmpl.data()) != nullptr, "mkdtemp")) {
    return 1;
  }
  const std::string root_path = tmpl;
  absl::StatusOr<kmodd::Fd> root = kmodd::OpenRoot(root_path);
  if (!Check(root.ok(), "OpenRoot")) {
    return 1;
  }
  // "lib/modules/6.1.0-31-cloud-amd64/...": names as long as a driver tree's.
  std::string rel;
  for (int i = 0; i < depth; ++i) {
    rel = kmodd::JoinPath(rel, "component-" + std::to_string(i));
  }
  if (!Check(kmodd::MakeDirs(*root, root_path, rel).ok(), "MakeDirs")) {
    return 1;
  }
  const std::string file = rel + "/fw.bin";
  const int fd = open((root_path + "/" + file).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (!Check(fd >= 0, "create fw.bin")) {
    return 1;
  }
  close(fd);
  const std::string absent = rel + "/absent";

  struct Op {
    const char* name;
    std::function<bool()> call;
  };
  const std::vector<Op> ops = {
      {"MakeDirs (exists)", [&] { return kmodd::MakeDirs(*root, root_path, rel).ok(); }},
      {"OpenRegularBeneath",
       [&] {
         auto f = kmodd::OpenRegularBeneath(*root, root_path, file);
         return f.ok() && f->has_value();
       }},
      {"WalkDir (last absent)",
       [&] {
         auto w = kmodd::WalkDir(*root, root_path, absent);
         return w.ok() && w->end == kmodd::DirWalk::kAbsent;
       }},
  };
  std::printf("depth=%d runs=%d calls=%d kernel-openat2=%s\n", depth, runs, calls,
              kmodd::ActiveResolver() == kmodd::Resolver::kOpenat2 ? "yes" : "no");
  std::printf("%-24s %12s %12s %8s\n", "call", "openat2 ns", "walk ns", "walk/o2");
  for (const Op& op : ops) {
    // Alternating run by run, so that both see the same machine.
    std::vector<double> openat2_ns, walk_ns;
    for (int r = 0; r < runs; ++r) {
      openat2_ns.push_back(NsPerCall(kmodd::Resolver::kOpenat2, calls, op.call));
      walk_ns.push_back(NsPerCall(kmodd::Resolver::kWalk, calls, op.call));
    }
    const double o2 = Median(openat2_ns);
    const double walk = Median(walk_ns);
    std::printf("%-24s %12.0f %12.0f %7.2fx\n", op.name, o2, walk, walk / o2);
  }
  std::error_code ec;
  std::filesystem::remove_all(root_path, ec);
  return 0;
}
