#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "controller/server/authenticator.h"

namespace kmodd::server::testing {

// Tokens and the node each is bound to; any other token is not valid. Valid tokens hold
// until `until`. Hold() makes every call wait until Release(), as a slow API server would.
class FakeAuthenticator final : public Authenticator {
 public:
  explicit FakeAuthenticator(std::map<std::string, std::string> nodes,
                             absl::Time until = absl::InfiniteFuture())
      : nodes_(std::move(nodes)), until_(until) {}

  absl::StatusOr<absl::Time> Authenticate(const std::string& token,
                                          const std::string& node) override {
    std::unique_lock lock(mu_);
    ++calls_;
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return !held_; });
    --waiting_;
    auto it = nodes_.find(token);
    if (it == nodes_.end()) {
      return absl::UnauthenticatedError("not a valid token");
    }
    if (it->second != node) {
      return absl::PermissionDeniedError(
          absl::StrCat("node \"", node, "\" is not the node of this token (\"", it->second, "\")"));
    }
    return until_;
  }

  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // Blocks until `n` calls are waiting in Hold.
  void AwaitWaiting(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return waiting_ >= n; });
  }

  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const std::map<std::string, std::string> nodes_;
  const absl::Time until_;
  int calls_ = 0;
  int waiting_ = 0;
  bool held_ = false;
};

}  // namespace kmodd::server::testing
