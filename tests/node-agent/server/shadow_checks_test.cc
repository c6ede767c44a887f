// The shadow re-check (node-agent/server/shadow_checks.h), with time as an input.

#include <catch2/catch.hpp>

#include <chrono>
#include <map>

#include "node-agent/server/shadow_checks.h"

using kmodd::agent::ShadowChecks;
using std::chrono::minutes;

namespace {

// A firmware store whose host shadows are set by the test; counts the looks.
class HostFirmware : public kmodd::reconcile::FirmwareStore {
 public:
  std::map<std::string, std::string> host_files;  // staged path -> the host's file
  mutable int looks = 0;

  absl::StatusOr<std::vector<std::string>> Stage(const std::string&, const std::string&) override {
    return std::vector<std::string>{};
  }
  absl::Status Release(const std::string&) override { return absl::OkStatus(); }
  std::vector<kmodd::firmware::Shadow> Shadowed(const std::vector<std::string>& paths) const override {
    ++looks;
    std::vector<kmodd::firmware::Shadow> out;
    for (const auto& p : paths) {
      if (auto it = host_files.find(p); it != host_files.end()) {
        out.push_back({p, "/var/lib/firmware/" + p, it->second});
      }
    }
    return out;
  }
};

const kmodd::Clock::Monotonic kT0 = kmodd::Clock::Monotonic{} + std::chrono::hours(1);

kmodd::reconcile::Journal Staged(const std::vector<std::string>& files) {
  kmodd::reconcile::Journal j;
  j.modules["ns/a"].firmware = files;
  return j;
}

}  // namespace

TEST_CASE("staged firmware is looked at for shadows when it changes and every recheck period",
          "[server][shadows]") {
  HostFirmware fw;
  fw.host_files["fw/a.bin"] = "/lib/firmware/fw/a.bin";
  ShadowChecks checks(fw, minutes(5));
  const std::string warning =
      "staged firmware /var/lib/firmware/fw/a.bin shadows the host's /lib/firmware/fw/a.bin: "
      "the kernel loads the staged file instead";

  // First look: found, and new.
  auto fresh = checks.Refresh(Staged({"fw/a.bin"}), kT0);
  CHECK(fw.looks == 1);
  REQUIRE(fresh.size() == 1);
  CHECK(fresh[0] == std::pair<std::string, std::string>{"ns/a", warning});
  CHECK(checks.warnings().at("ns/a") == std::vector<std::string>{warning});

  // Nothing changed, within the period: not looked at again.
  CHECK(checks.Refresh(Staged({"fw/a.bin"}), kT0 + minutes(4)).empty());
  CHECK(fw.looks == 1);

  // The period passed: looked at again; the same finding is not new.
  CHECK(checks.Refresh(Staged({"fw/a.bin"}), kT0 + minutes(5)).empty());
  CHECK(fw.looks == 2);
  CHECK(checks.warnings().at("ns/a") == std::vector<std::string>{warning});

  // The host's file went (a package removed): the warning goes at the next period.
  fw.host_files.clear();
  CHECK(checks.Refresh(Staged({"fw/a.bin"}), kT0 + minutes(6)).empty());
  CHECK(checks.warnings().at("ns/a") == std::vector<std::string>{warning});
  CHECK(checks.Refresh(Staged({"fw/a.bin"}), kT0 + minutes(10)).empty());
  CHECK(checks.warnings().at("ns/a").empty());
  CHECK(fw.looks == 3);

  // What is staged changed: looked at at once.
  fw.host_files["fw/b.bin"] = "/lib/firmware/fw/b.bin";
  fresh = checks.Refresh(Staged({"fw/a.bin", "fw/b.bin"}), kT0 + minutes(11));
  CHECK(fw.looks == 4);
  REQUIRE(fresh.size() == 1);
  CHECK(fresh[0].first == "ns/a");
  CHECK_THAT(fresh[0].second, Catch::Contains("/lib/firmware/fw/b.bin"));

  // Nothing staged any more: the Module and its warnings are forgotten.
  CHECK(checks.Refresh(Staged({}), kT0 + minutes(12)).empty());
  CHECK(checks.warnings().count("ns/a") == 0);
}
