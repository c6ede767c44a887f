#pragma once

// The Stager as the reconciler's FirmwareStore, behind a mutex: the worker stages and
// releases while the local service lists the ledger. Shadowed looks at the host's firmware
// tree as `search` describes it, reading firmware_class.path fresh each time.

#include <mutex>
#include <string>
#include <vector>

#include "firmware/shadow.h"
#include "firmware/stager.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::agent {

class LockedStagerStore : public reconcile::FirmwareStore {
 public:
  struct ShadowOptions {
    std::string host_root = "/";
    // firmware_class's parameter file (read only here, whoever sets it).
    std::string class_path_param = "/sys/module/firmware_class/parameters/path";
    std::string kernel_release;
  };

  LockedStagerStore(firmware::Stager stager, ShadowOptions shadow)
      : stager_(std::move(stager)), shadow_(std::move(shadow)) {}

  absl::StatusOr<std::vector<std::string>> Stage(const std::string& owner,
                                                 const std::string& source_dir) override {
    std::lock_guard<std::mutex> lock(mu_);
    return stager_.Stage(owner, source_dir);
  }
  absl::Status Release(const std::string& owner) override {
    std::lock_guard<std::mutex> lock(mu_);
    return stager_.Release(owner);
  }
  std::vector<firmware::StagedFile> List() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stager_.List();
  }
  std::string directory() const { return stager_.options().firmware_dir; }

  // The file system only: no lock needed (firmware_dir is fixed for the stager's life).
  std::vector<firmware::Shadow> Shadowed(const std::vector<std::string>& paths) const override {
    firmware::FirmwareSearch search;
    search.host_root = shadow_.host_root;
    search.class_path = firmware::ReadClassPath(shadow_.class_path_param);
    search.kernel_release = shadow_.kernel_release;
    return firmware::FindShadows(search, firmware_dir_, paths);
  }

 private:
  mutable std::mutex mu_;
  firmware::Stager stager_;
  ShadowOptions shadow_;
  const std::string firmware_dir_ = stager_.options().firmware_dir;
};

}  // namespace kmodd::agent
