#include "node-agent/kernel/kmod_kernel.h"

#include <sys/utsname.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "node-agent/kernel/errors.h"
#include "node-agent/kernel/tree.h"

namespace kmodd::kernel {

namespace fs = std::filesystem;

namespace {

// No modprobe.d configuration: kmodd never runs install/remove commands and applies no
// blacklist or options it was not given.
const char* const kNoConfig[] = {nullptr};

void DropLibkmodLog(void*, int, const char*, int, const char*, const char*, va_list) {}

// Whether the loaded module is the one in `file`, when an insert finds the name taken.
// srcversion decides when either has one (the kernel shows it in sysfs exactly when the
// file carries it). Most in-tree modules have none (no MODULE_VERSION): then the
// out-of-tree taint tells an in-tree module from an OOT namesake.
bool SameModule(const LoadedModule& loaded, const TreeModule& file) {
  if (!loaded.srcversion.empty() || !file.srcversion.empty()) {
    return loaded.srcversion == file.srcversion;
  }
  return loaded.OutOfTree() != file.in_tree;
}

std::string Describe(const LoadedModule& m) {
  return absl::StrCat(m.OutOfTree() ? "out-of-tree" : "in-tree", ", srcversion ",
                      m.srcversion.empty() ? "none" : m.srcversion);
}

// Already loaded is success only if it is `path`'s module, not a namesake: an in-tree
// module when kmodd inserts its own, or kmodd's when it reloads the in-tree one.
absl::Status CheckAlreadyLoaded(const ProcRoots& roots, const std::string& name,
                                const std::string& path, const char* remedy) {
  auto state = ReadKernelState(roots);
  if (!state.ok()) {
    return state.status();
  }
  const LoadedModule* loaded = state->Find(name);
  if (loaded == nullptr) {
    return absl::OkStatus();
  }
  auto file = ReadModuleFile(path);
  if (!file.ok()) {
    return file.status();
  }
  if (SameModule(*loaded, *file)) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "insert ", name, " (", path, "): another module named ", name, " is loaded (",
      Describe(*loaded), "; the file is ", file->in_tree ? "in-tree" : "out-of-tree",
      ", srcversion ", file->srcversion.empty() ? "none" : file->srcversion, "); ", remedy));
}

}  // namespace

KmodKernel::KmodKernel(Options options) : options_(std::move(options)) {}

absl::StatusOr<kmod_ctx*> KmodKernel::HostCtx() {
  if (host_ctx_) {
    return host_ctx_.get();
  }
  std::string dir = options_.host_modules_dir;
  if (dir.empty()) {
    utsname u{};
    if (uname(&u) != 0) {
      return absl::UnknownError("uname failed");
    }
    dir = absl::StrCat("/lib/modules/", u.release);
  }
  host_ctx_.reset(kmod_new(dir.c_str(), kNoConfig));
  if (!host_ctx_) {
    return absl::ResourceExhaustedError(absl::StrCat("kmod_new(", dir, ") failed"));
  }
  // Errors are returned to the caller, who logs them once; libkmod's own log stays quiet.
  kmod_set_log_fn(host_ctx_.get(), DropLibkmodLog, nullptr);
  return host_ctx_.get();
}

absl::StatusOr<KernelState> KmodKernel::Observe() { return ReadKernelState(options_.roots); }

absl::Status KmodKernel::InsertFile(const std::string& path, const std::string& params) {
  std::lock_guard<std::mutex> lock(mu_);
  auto ctx = HostCtx();
  if (!ctx.ok()) {
    return ctx.status();
  }
  kmod_module* raw = nullptr;
  if (int err = kmod_module_new_from_path(*ctx, path.c_str(), &raw); err < 0) {
    return absl::NotFoundError(absl::StrCat("insert ", path, ": cannot open module file: ",
                                            std::strerror(-err)));
  }
  KmodModule mod(raw);
  const std::string name = kmod_module_get_name(mod.get());
  const int err = kmod_module_insert_module(mod.get(), 0, params.c_str());
  if (err == -EEXIST) {
    return CheckAlreadyLoaded(options_.roots, name, path,
                              "remove it first (inTreeModulesToRemove)");
  }
  return err < 0 ? KernelError(KernelOp::kInsert, -err, name, path) : absl::OkStatus();
}

absl::Status KmodKernel::InsertHost(const std::string& name, const std::string& params) {
  std::lock_guard<std::mutex> lock(mu_);
  auto ctx = HostCtx();
  if (!ctx.ok()) {
    return ctx.status();
  }
  kmod_module* raw = nullptr;
  if (int err = kmod_module_new_from_name(*ctx, name.c_str(), &raw); err < 0) {
    return absl::NotFoundError(absl::StrCat("insert ", name, ": not a module of this kernel"));
  }
  KmodModule mod(raw);
  const char* path = kmod_module_get_path(mod.get());
  if (path == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "insert ", name, ": not found in the running kernel's modules (",
        kmod_get_dirname(*ctx), ")"));
  }
  // modules.dep may name a file that is gone (the tree changed under the running kernel);
  // the kernel's ENOENT would read as an unknown symbol.
  if (std::error_code ec; !std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(
        absl::StrCat("insert ", name, ": ", path, " is listed in modules.dep but missing"));
  }
  // libkmod reports a loaded namesake as success: check first.
  if (auto s = CheckAlreadyLoaded(options_.roots, name, path,
                                  "it must be removed before the in-tree one can load");
      !s.ok()) {
    return s;
  }
  // Dependencies come from the host tree's modules.dep; no install commands are run.
  const int err = kmod_module_probe_insert_module(mod.get(), KMOD_PROBE_IGNORE_COMMAND,
                                                  params.c_str(), nullptr, nullptr, nullptr);
  return err < 0 ? KernelError(KernelOp::kInsert, -err, name, path) : absl::OkStatus();
}

absl::Status KmodKernel::Remove(const std::string& name) {
  auto state = ReadKernelState(options_.roots);
  if (!state.ok()) {
    return state.status();
  }
  const LoadedModule* m = state->Find(name);
  if (m == nullptr) {
    return absl::OkStatus();
  }
  if (m->InUse()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "remove ", m->name, ": in use (refcount ", m->refcount, m->holders.empty() ? "" : ", holders ",
        absl::StrJoin(m->holders, ", "),
        "); it is never forced: stop its users and it will be removed"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto ctx = HostCtx();
  if (!ctx.ok()) {
    return ctx.status();
  }
  kmod_module* raw = nullptr;
  if (int err = kmod_module_new_from_name(*ctx, m->name.c_str(), &raw); err < 0) {
    return KernelError(KernelOp::kRemove, -err, m->name);
  }
  KmodModule mod(raw);
  const int err = kmod_module_remove_module(mod.get(), 0);
  return err < 0 ? KernelError(KernelOp::kRemove, -err, m->name) : absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> KmodKernel::HostModulePath(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto ctx = HostCtx();
  if (!ctx.ok()) {
    return ctx.status();
  }
  kmod_list* list_raw = nullptr;
  if (int err = kmod_module_new_from_lookup(*ctx, name.c_str(), &list_raw); err < 0) {
    return absl::UnknownError(absl::StrCat("lookup of ", name, " in ", kmod_get_dirname(*ctx),
                                           " failed: ", std::strerror(-err)));
  }
  KmodModuleList list(list_raw);
  for (kmod_list* l = list.get(); l != nullptr; l = kmod_list_next(list.get(), l)) {
    KmodModule mod(kmod_module_get_module(l));
    const char* path = kmod_module_get_path(mod.get());
    if (path != nullptr && CanonicalModuleName(kmod_module_get_name(mod.get())) ==
                               CanonicalModuleName(name)) {
      return std::optional<std::string>(path);
    }
  }
  return std::optional<std::string>();
}

absl::StatusOr<std::string> KmodKernel::RunningVermagic() {
  if (!vermagic_.empty()) {
    return vermagic_;
  }
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto ctx = HostCtx();
    if (!ctx.ok()) {
      return ctx.status();
    }
    dir = kmod_get_dirname(*ctx);
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir + "/kernel", ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().string().find(".ko") != std::string::npos) {
      auto m = ReadModuleFile(it->path().string());
      if (m.ok() && !m->vermagic.empty()) {
        vermagic_ = m->vermagic;
        return vermagic_;
      }
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "cannot learn the running kernel's vermagic: no module file under ", dir, "/kernel"));
}

}  // namespace kmodd::kernel
