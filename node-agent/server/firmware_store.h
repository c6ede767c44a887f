#pragma once

// The Stager as the reconciler's FirmwareStore, behind a mutex: the worker stages and
// releases while the local service lists the ledger.

#include <mutex>
#include <string>
#include <vector>

#include "firmware/stager.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::server {

class LockedStagerStore : public reconcile::FirmwareStore {
 public:
  explicit LockedStagerStore(firmware::Stager stager) : stager_(std::move(stager)) {}

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

 private:
  mutable std::mutex mu_;
  firmware::Stager stager_;
};

}  // namespace kmodd::server
