#include <catch2/catch.hpp>

#include "tools/agentctl/format.h"
#include "tools/agentctl/proto_value.h"
#include "tools/agentctl/table.h"

namespace kmodd::agentctl {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

constexpr int64_t kHour = 3600;
constexpr int64_t kDay = 24 * kHour;

int64_t Ago(int64_t seconds) { return kNow - seconds * 1000; }

v1::ModuleStatus Module(const char* ns, const char* name, v1::Phase phase) {
  v1::ModuleStatus m;
  m.set_namespace_(ns);
  m.set_name(name);
  m.set_phase(phase);
  return m;
}

TEST_CASE("ages read as kubectl's AGE column") {
  CHECK(HumanAge(kNow, 0) == "<unknown>");
  CHECK(HumanAge(kNow, kNow + 1500) == "0s");
  CHECK(HumanAge(kNow, kNow + 2000) == "<invalid>");
  CHECK(HumanAge(kNow, Ago(5)) == "5s");
  CHECK(HumanAge(kNow, Ago(119)) == "119s");
  CHECK(HumanAge(kNow, Ago(180)) == "3m");
  CHECK(HumanAge(kNow, Ago(200)) == "3m20s");
  CHECK(HumanAge(kNow, Ago(2710)) == "45m");
  CHECK(HumanAge(kNow, Ago(2 * kHour)) == "120m");  // kubectl switches to hours at 3h
  CHECK(HumanAge(kNow, Ago(3 * kHour)) == "3h");
  CHECK(HumanAge(kNow, Ago(3 * kHour + 300)) == "3h5m");
  CHECK(HumanAge(kNow, Ago(30 * kHour)) == "30h");
  CHECK(HumanAge(kNow, Ago(3 * kDay + 4 * kHour)) == "3d4h");
  CHECK(HumanAge(kNow, Ago(40 * kDay)) == "40d");
  CHECK(HumanAge(kNow, Ago(1096 * kDay)) == "3y1d");
}

TEST_CASE("digests shorten to 12 hex digits and sizes to binary units") {
  CHECK(ShortDigest("sha256:0123456789abcdef0123") == "0123456789ab");
  CHECK(ShortDigest("") == "<none>");
  CHECK(FormatBytes(512) == "512 B");
  CHECK(FormatBytes(1536) == "1.5 KiB");
  CHECK(FormatBytes(12'897'484) == "12.3 MiB");
  CHECK(FormatBytes(int64_t{3} << 30) == "3.0 GiB");
}

TEST_CASE("pull progress says how much of how much") {
  CHECK(PullProgress(12'897'484, 100 << 20) == "pulled 12.3 MiB / 100.0 MiB (12%)");
  CHECK(PullProgress(100 << 20, 100 << 20) == "pulled 100.0 MiB / 100.0 MiB (100%)");
  CHECK(PullProgress(2048, 0) == "pulled 2.0 KiB");
}

TEST_CASE("status prints the node line and one row per module") {
  v1::StatusResponse s;
  s.mutable_node()->set_name("gpu-1");
  s.mutable_node()->set_kernel_release("6.1.0-27-cloud-amd64");
  s.set_controller("10.0.2.2:9443");
  s.set_controller_connected(true);
  s.set_controller_since_unix_ms(Ago(300));
  s.set_desired_version("r1-3");
  s.set_desired_source("controller");
  auto loaded = Module("intel-gpu", "gpu-xe", v1::LOADED);
  loaded.set_version("1.0");
  loaded.set_image_digest("sha256:aabbccddeeff00112233");
  loaded.set_since_unix_ms(Ago(4 * kHour));
  *s.add_modules() = loaded;
  auto pulling = Module("storage", "fast-nvme", v1::PULLING);
  pulling.set_since_unix_ms(Ago(5));
  pulling.set_pull_bytes_done(12'897'484);
  pulling.set_pull_bytes_total(100 << 20);
  *s.add_modules() = pulling;

  CHECK(StatusHeader(s, kNow) ==
        "Node: gpu-1   Kernel: 6.1.0-27-cloud-amd64   Controller: 10.0.2.2:9443 connected 5m"
        "   Desired: r1-3 (controller)\n");
  CHECK(StatusTable(s, kNow, false) ==
        "MODULE              PHASE     VERSION   IMAGE-DIGEST   SINCE   MESSAGE\n"
        "intel-gpu/gpu-xe    Loaded    1.0       aabbccddeeff   4h\n"
        "storage/fast-nvme   Pulling   <none>    <none>         5s      pulled 12.3 MiB / 100.0 MiB (12%)\n");
}

TEST_CASE("status -o wide adds the error class, image, desired version and kernel modules") {
  v1::StatusResponse s;
  auto failed = Module("a", "m", v1::FAILED);
  failed.set_message("vermagic");
  failed.set_error_class(v1::ERROR_TERMINAL);
  failed.set_image("reg/m:1");
  failed.set_desired_version("r1-2");
  failed.add_kernel_modules("m");
  failed.add_kernel_modules("m_dep");
  failed.set_since_unix_ms(Ago(1));
  *s.add_modules() = failed;
  CHECK(StatusTable(s, kNow, true) ==
        "MODULE   PHASE    VERSION   IMAGE-DIGEST   SINCE   MESSAGE    ERROR      IMAGE     "
        "DESIRED   KERNEL-MODULES\n"
        "a/m      Failed   <none>    <none>         1s      vermagic   Terminal   reg/m:1   "
        "r1-2      m, m_dep\n");
}

TEST_CASE("status lists a module's warnings under the table, naming the module") {
  v1::StatusResponse s;
  auto loaded = Module("gpu", "xe", v1::LOADED);
  loaded.set_since_unix_ms(Ago(1));
  loaded.add_warnings("staged firmware /var/lib/firmware/xe/guc.bin shadows the host's "
                      "/lib/firmware/xe/guc.bin: the kernel loads the staged file instead");
  *s.add_modules() = loaded;
  CHECK(StatusTable(s, kNow, false) ==
        "MODULE   PHASE    VERSION   IMAGE-DIGEST   SINCE   MESSAGE\n"
        "gpu/xe   Loaded   <none>    <none>         1s\n"
        "\nWarnings:\n"
        "  gpu/xe: staged firmware /var/lib/firmware/xe/guc.bin shadows the host's "
        "/lib/firmware/xe/guc.bin: the kernel loads the staged file instead\n");
}

TEST_CASE("status of a disconnected agent with no modules says so") {
  v1::StatusResponse s;
  s.mutable_node()->set_name("n");
  s.set_controller_since_unix_ms(Ago(60));
  s.add_overrides("a/m");
  CHECK(StatusHeader(s, kNow) ==
        "Node: n   Kernel: <none>   Controller: controller disconnected 60s\n"
        "Overrides (until the next desired state): a/m\n");
  CHECK(StatusTable(s, kNow, false) == "No modules on this node.\n");
}

TEST_CASE("events print time, kind, module and message, with pull progress in bytes") {
  v1::Event e;
  e.set_unix_ms(1'700'000'000'123);
  e.set_kind("PullProgress");
  e.set_module("storage/fast-nvme");
  e.set_bytes_done(12'897'484);
  e.set_bytes_total(100 << 20);
  CHECK(EventLine(e, absl::UTCTimeZone()) ==
        "22:13:20.123 PullProgress     storage/fast-nvme            pulled 12.3 MiB / 100.0 MiB "
        "(12%)\n");
  v1::Event node;
  node.set_unix_ms(1'700'000'000'000);
  node.set_kind("DesiredReceived");
  node.set_message("version r1-4, 2 modules");
  CHECK(EventLine(node, absl::UTCTimeZone()) ==
        "22:13:20.000 DesiredReceived  -                            version r1-4, 2 modules\n");
  v1::Event phase;
  phase.set_kind("PhaseChanged");
  phase.set_module("a/m");
  phase.set_phase(v1::LOADED);
  CHECK(EventLine(phase, absl::UTCTimeZone()).ends_with("a/m                          Loaded\n"));
  phase.set_phase(v1::AVAILABLE);
  phase.set_message("waiting for readiness check \"v\" (path): /sys/module/m/v does not exist");
  CHECK(EventLine(phase, absl::UTCTimeZone())
            .ends_with("a/m                          Available: waiting for readiness check \"v\" "
                       "(path): /sys/module/m/v does not exist\n"));
}

TEST_CASE("plan lists actions and problems, or says there is nothing to do") {
  v1::PreviewPassResponse p;
  CHECK(PlanText(p) == "Nothing to do: the node runs its desired state.\n");
  auto* a = p.add_actions();
  a->set_kind("load");
  a->set_module("a/m");
  a->set_reason("desired, not loaded");
  p.add_problems("b/n: no image for kernel 6.1");
  CHECK(PlanText(p) ==
        "ACTION   MODULE   REASON\n"
        "load     a/m      desired, not loaded\n"
        "\nProblems:\n  b/n: no image for kernel 6.1\n");
}

TEST_CASE("firmware and images print as tables") {
  v1::FirmwareResponse f;
  f.set_directory("/lib/firmware/updates");
  auto* file = f.add_files();
  file->set_path("intel/xe/guc.bin");
  file->add_owners("intel-gpu/gpu-xe");
  CHECK(FirmwareText(f) ==
        "Firmware directory: /lib/firmware/updates\n"
        "PATH               OWNERS             SHADOWS\n"
        "intel/xe/guc.bin   intel-gpu/gpu-xe   <none>\n");
  file->set_shadows("/lib/firmware/intel/xe/guc.bin");
  CHECK(FirmwareText(f) ==
        "Firmware directory: /lib/firmware/updates\n"
        "PATH               OWNERS             SHADOWS\n"
        "intel/xe/guc.bin   intel-gpu/gpu-xe   /lib/firmware/intel/xe/guc.bin\n");

  v1::ImagesResponse r;
  auto* i = r.add_images();
  i->set_tree("sha256-aaaa");
  i->add_references("reg/m:1");
  i->set_in_use(true);
  i->set_bytes(3 << 20);
  r.add_pruned("sha256-bbbb");
  CHECK(ImagesText(r, true) ==
        "removed sha256-bbbb\n\n"
        "TREE          REFERENCES   IN-USE   SIZE\n"
        "sha256-aaaa   reg/m:1      yes      3.0 MiB\n");
  CHECK(ImagesText(v1::ImagesResponse(), true) == "Nothing to prune.\nNo cached images.\n");
}

TEST_CASE("machine output prints every field under its JSON name, enums by name") {
  auto m = Module("a", "m", v1::LOADED);
  m.add_kernel_modules("m");
  m.set_since_unix_ms(42);
  const Value v = MessageValue(m);
  REQUIRE(v.Find("namespace") != nullptr);
  CHECK(v.Find("namespace")->AsString() == "a");
  CHECK(v.Find("phase")->AsString() == "LOADED");
  CHECK(v.Find("errorClass")->AsString() == "ERROR_NONE");
  CHECK(v.Find("sinceUnixMs")->AsInt() == 42);
  CHECK(v.Find("message")->AsString().empty());
  CHECK(v.Find("kernelModules")->AsList().size() == 1);
  CHECK(v.Find("firmware")->AsList().empty());

  v1::StatusResponse s;
  (*s.mutable_node()->mutable_labels())["z"] = "1";
  (*s.mutable_node()->mutable_labels())["a"] = "2";
  const Value sv = MessageValue(s);
  const auto& labels = sv.Find("node")->Find("labels")->AsMap();
  REQUIRE(labels.size() == 2);
  CHECK(labels[0].first == "a");
  CHECK(ToJson(sv).find("\"controllerConnected\": false") != std::string::npos);
}

TEST_CASE("tables pad columns three spaces apart without trailing spaces") {
  CHECK(RenderTable({{"A", "BB", "C"}, {"long", "x", ""}}) == "A      BB   C\nlong   x\n");
}

}  // namespace
}  // namespace kmodd::agentctl
