#pragma once

// RAII for every libkmod handle. Raw libkmod types do not leave node-agent/kernel/.

#include <libkmod.h>

#include <memory>

namespace kmodd::kernel {

struct KmodCtxDeleter {
  void operator()(kmod_ctx* c) const { kmod_unref(c); }
};
struct KmodModuleDeleter {
  void operator()(kmod_module* m) const { kmod_module_unref(m); }
};
struct KmodModuleListDeleter {
  void operator()(kmod_list* l) const { kmod_module_unref_list(l); }
};
struct KmodInfoListDeleter {
  void operator()(kmod_list* l) const { kmod_module_info_free_list(l); }
};
struct KmodVersionListDeleter {
  void operator()(kmod_list* l) const { kmod_module_versions_free_list(l); }
};

using KmodCtx = std::unique_ptr<kmod_ctx, KmodCtxDeleter>;
using KmodModule = std::unique_ptr<kmod_module, KmodModuleDeleter>;
using KmodModuleList = std::unique_ptr<kmod_list, KmodModuleListDeleter>;
using KmodInfoList = std::unique_ptr<kmod_list, KmodInfoListDeleter>;
using KmodVersionList = std::unique_ptr<kmod_list, KmodVersionListDeleter>;

}  // namespace kmodd::kernel
