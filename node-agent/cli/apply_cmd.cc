// kmodd-agent apply: one-shot reconcile of a NodeModulesConfig on this node.

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/value_build.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/value.h"
#include "api/decode.h"
#include "api/phase.h"
#include "firmware/shadow.h"
#include "firmware/stager.h"
#include "node-agent/cli/apply.h"
#include "node-agent/cli/commands.h"
#include "node-agent/cli/image_flags.h"
#include "node-agent/kernel/errors.h"
#include "node-agent/kernel/kmod_kernel.h"
#include "node-agent/reconcile/executor.h"
#include "node-agent/reconcile/oci_image_store.h"
#include "node-agent/reconcile/action_planner.h"

namespace kmodd::agent {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-agent apply -f DESIRED.yaml [--state-dir DIR] [--firmware-dir DIR]\n"
    "                         [--firmware-class-path] [--cache DIR] [--pull-secret FILE]\n"
    "                         [--ca FILE] [-o yaml|json]\n"
    "  DESIRED is one NodeModulesConfig as `kmodd-controller plan` prints it (or a List\n"
    "  holding one). Reconciles until converged or failed, prints the observed state, and\n"
    "  exits 0 iff converged. An empty module list unloads what kmodd loaded, only that.\n"
    "  containerImage is an OCI reference, oci-layout:PATH[:TAG], or dir:/path/to/rootfs.\n";

constexpr int kMaxRounds = 6;

class StagerStore : public reconcile::FirmwareStore {
 public:
  explicit StagerStore(firmware::Stager stager) : stager_(std::move(stager)) {}
  absl::StatusOr<std::vector<std::string>> Stage(const std::string& owner,
                                                 const std::string& source_dir) override {
    return stager_.Stage(owner, source_dir);
  }
  absl::Status Release(const std::string& owner) override { return stager_.Release(owner); }

 private:
  firmware::Stager stager_;
};

absl::StatusOr<api::NodeModulesConfig> ReadDesired(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return text.status();
  }
  api::Decoded d = api::DecodeDocuments(*text, path);
  for (const auto& w : d.warnings) {
    std::cerr << "warning: " << w.ToString() << "\n";
  }
  if (!d.errors.empty()) {
    std::string msg;
    for (const auto& e : d.errors) {
      absl::StrAppend(&msg, msg.empty() ? "" : "; ", e.ToString());
    }
    return absl::InvalidArgumentError(msg);
  }
  if (d.node_modules_configs.size() != 1 || !d.modules.empty() || !d.nodes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected exactly one NodeModulesConfig, found ", d.node_modules_configs.size()));
  }
  return std::move(d.node_modules_configs.front().object);
}

}  // namespace

absl::StatusOr<ApplyReport> ApplyDesired(const ApplyOptions& o,
                                         const api::NodeModulesConfig& desired) {
  firmware::StagerOptions fo;
  fo.firmware_dir = o.firmware_dir;
  fo.ledger_path = o.state_dir + "/firmware-ledger.json";
  if (o.firmware_class_path) {
    fo.class_path_param = "/sys/module/firmware_class/parameters/path";
  }
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir, ec);
  auto stager = firmware::Stager::Open(fo);
  if (!stager.ok()) {
    return stager.status();
  }
  StagerStore firmware_store(std::move(*stager));
  kernel::KmodKernel kernel(kernel::KmodKernel::Options{});
  image::ImageCache cache(o.cache.empty() ? o.state_dir + "/images" : o.cache, BeastFactory());
  reconcile::OciImageStore::Options image_options;
  image_options.ca_file = o.ca_file;
  if (!o.pull_secret_file.empty()) {
    auto secret = ReadFile(o.pull_secret_file);
    if (!secret.ok()) {
      return secret.status();
    }
    image_options.pull_secret = *secret;
  }
  reconcile::OciImageStore images(cache, image_options);
  const std::string journal_path = o.state_dir + "/journal.json";
  auto journal = reconcile::LoadJournal(journal_path);
  if (!journal.ok()) {
    return journal.status();
  }
  reconcile::Executor executor(kernel, &firmware_store, journal_path, *journal);

  std::map<std::string, absl::Status> last_error;
  std::vector<reconcile::DesiredModule> prepared;
  bool converged = false;
  for (int round = 0; round < kMaxRounds && !converged; ++round) {
    auto observed = kernel.Observe();
    if (!observed.ok()) {
      return absl::Status(observed.status().code(),
                          absl::StrCat("observing the kernel: ", observed.status().message()));
    }
    reconcile::ForgetBoot(*journal, observed->boot_id);
    prepared.clear();
    for (const auto& spec : desired.modules) {
      prepared.push_back(reconcile::Prepare(spec, observed->release, images, kernel));
      if (!prepared.back().problem.ok() && round == 0) {
        std::cerr << "error: " << spec.Key() << ": " << prepared.back().problem.message() << "\n";
      }
    }
    auto actions = reconcile::PlanActions(prepared, *observed, *journal);
    converged = actions.empty();
    bool retry = false;
    for (const auto& a : actions) {
      const absl::Status s = executor.Run(a, prepared);
      last_error[a.key] = s;
      if (kernel::OutcomeOf(s) == kernel::Outcome::kRetry) {
        retry = true;
      } else if (!s.ok()) {
        // A reload's message names its module and the Module it was removed for.
        std::cerr << "error: "
                  << (a.kind == reconcile::Action::Kind::kReloadInTree ? "" : a.key + ": ")
                  << s.message() << "\n";
      }
    }
    bool terminal = false;
    for (const auto& [key, s] : last_error) {
      terminal = terminal || (!s.ok() && kernel::OutcomeOf(s) != kernel::Outcome::kRetry);
    }
    if (terminal) {
      break;
    }
    if (retry) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << round));
    }
  }
  // Report: every desired Module, and every journal entry still present.
  auto observed = kernel.Observe();
  Value items = Value::EmptyList();
  bool all_ok = true;
  for (const auto& d : prepared) {
    Value v = Value::EmptyMap();
    v.Set("name", d.key);
    const bool ok = d.problem.ok() && observed.ok() && reconcile::Converged(d, *observed, *journal);
    all_ok = all_ok && ok;
    auto je = journal->modules.find(d.key);
    const api::Phase phase = ok ? api::Phase::kLoaded
                             : d.problem.ok() && je != journal->modules.end() ? je->second.phase
                                                                             : api::Phase::kFailed;
    v.Set("phase", api::PhaseName(phase));
    std::string message = !d.problem.ok() ? std::string(d.problem.message())
                          : je != journal->modules.end() ? je->second.message : "";
    v.Set("message", message);
    v.Set("modules", StringListValue(je != journal->modules.end() ? je->second.loaded
                                                              : std::vector<std::string>{}));
    v.Set("inTreeRemoved", StringListValue(reconcile::InTreeRemovedFor(*journal, d.key)));
    v.Set("firmware", StringListValue(je != journal->modules.end() ? je->second.firmware
                                                               : std::vector<std::string>{}));
    if (je != journal->modules.end() && !je->second.firmware.empty() && observed.ok()) {
      // Reported, never refused: see firmware/shadow.h.
      const firmware::FirmwareSearch search{
          "/", firmware::ReadClassPath("/sys/module/firmware_class/parameters/path"),
          observed->release};
      std::vector<std::string> warnings;
      for (const auto& s : firmware::FindShadows(search, o.firmware_dir, je->second.firmware)) {
        warnings.push_back(firmware::ShadowWarning(s));
        std::cerr << "warning: " << d.key << ": " << warnings.back() << "\n";
      }
      if (!warnings.empty()) {
        v.Set("warnings", StringListValue(warnings));
      }
    }
    items.Append(std::move(v));
  }
  for (const auto& [key, e] : journal->modules) {
    bool desired_key = false;
    for (const auto& d : prepared) {
      desired_key = desired_key || d.key == key;
    }
    if (!desired_key) {
      all_ok = false;  // something that should be unloaded is still here
      Value v = Value::EmptyMap();
      v.Set("name", key);
      v.Set("phase", api::PhaseName(e.phase));
      v.Set("message", e.message);
      v.Set("modules", StringListValue(e.loaded));
      items.Append(std::move(v));
    }
  }
  // In-tree modules kmodd removed and has not loaded again: kept out by a desired Module,
  // or their reload failed (never a reason to keep a Module's unload from finishing).
  const bool modules_ok = all_ok;
  std::map<std::string, std::string> not_reloaded;
  if (observed.ok()) {
    for (const auto& a : reconcile::PlanActions(prepared, *observed, *journal)) {
      if (a.kind != reconcile::Action::Kind::kReloadInTree) {
        continue;
      }
      auto e = last_error.find(a.key);
      not_reloaded[a.key] = e != last_error.end() && !e->second.ok()
                                ? std::string(e->second.message())
                                : "not attempted";
      all_ok = false;
    }
  }
  Value in_tree = Value::EmptyList();
  for (const auto& r : journal->in_tree_removed) {
    Value v = Value::EmptyMap();
    v.Set("module", r.module);
    v.Set("removedFor", r.removed_for);
    auto why = not_reloaded.find(r.module);
    v.Set("message", why != not_reloaded.end() ? why->second : "kept out by a desired Module");
    in_tree.Append(std::move(v));
  }
  Value out = Value::EmptyMap();
  out.Set("node", desired.metadata.name);
  out.Set("kernel", observed.ok() ? observed->release : "");
  out.Set("bootId", observed.ok() ? observed->boot_id : "");
  out.Set("converged", all_ok);
  out.Set("modules", std::move(items));
  out.Set("inTreeRemoved", std::move(in_tree));
  return ApplyReport{std::move(out), all_ok, modules_ok, std::move(not_reloaded)};
}

int ApplyCommand(const std::vector<std::string>& args) {
  ApplyOptions o;
  flags::FlagSet flags("kmodd-agent apply", kUsage);
  flags.String("-f,--filename", "DESIRED.yaml", "the NodeModulesConfig to converge to", &o.file)
      .Needs("a path (a NodeModulesConfig)")
      .Required();
  flags.String("--state-dir", "DIR", "journal and firmware ledger (default /var/lib/kmodd)",
               &o.state_dir);
  flags.String("--firmware-dir", "DIR", "where firmware is staged (default /var/lib/firmware)",
               &o.firmware_dir);
  flags.Switch("--firmware-class-path",
               "point the kernel's firmware_class.path at the firmware dir\n"
               "while any module needs firmware (restored afterwards)",
               &o.firmware_class_path);
  flags.String("--cache", "DIR", "image cache (default STATE/images)", &o.cache);
  flags.String("--pull-secret", "FILE", ".dockerconfigjson for the registries",
               &o.pull_secret_file);
  flags.String("--ca", "FILE", "extra CAs for registries", &o.ca_file);
  flags.OneOf("-o,--output", "FORMAT", "yaml (default) or json", &o.format, {"yaml", "json"});
  if (std::optional<int> exit = flags.ParseOrExit(args, std::cout, std::cerr)) {
    return *exit;
  }
  auto desired = ReadDesired(o.file);
  if (!desired.ok()) {
    std::cerr << "error: " << desired.status().message() << "\n";
    return 1;
  }
  auto report = ApplyDesired(o, *desired);
  if (!report.ok()) {
    std::cerr << "error: " << report.status().message() << "\n";
    return 1;
  }
  std::cout << (o.format == "json" ? ToJson(report->report) : ToYaml(report->report));
  return report->converged ? 0 : 1;
}

}  // namespace kmodd::agent
