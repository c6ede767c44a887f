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
    // Already loaded counts as success only if it is this file's module, not an in-tree
    // namesake: compare source versions.
    auto file = ReadModuleFile(path);
    auto state = ReadKernelState(options_.roots);
    if (file.ok() && state.ok()) {
      const LoadedModule* loaded = state->Find(name);
      if (loaded != nullptr && !file->srcversion.empty() && !loaded->srcversion.empty() &&
          loaded->srcversion != file->srcversion) {
        return absl::FailedPreconditionError(absl::StrCat(
            "insert ", name, " (", path, "): another module named ", name,
            " is loaded (srcversion ", loaded->srcversion, ", file has ", file->srcversion,
            "); remove it first (inTreeModulesToRemove)"));
      }
    }
    return absl::OkStatus();
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
  if (kmod_module_get_path(mod.get()) == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "insert ", name, ": not found in the running kernel's modules (",
        kmod_get_dirname(*ctx), ")"));
  }
  // Dependencies come from the host tree's modules.dep; no install commands are run.
  const int err = kmod_module_probe_insert_module(mod.get(), KMOD_PROBE_IGNORE_COMMAND,
                                                  params.c_str(), nullptr, nullptr, nullptr);
  return err < 0 ? KernelError(KernelOp::kInsert, -err, name, kmod_module_get_path(mod.get()))
                 : absl::OkStatus();
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
