#pragma once

#include <map>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "controller/server/authenticator.h"

namespace kmodd::server::testing {

// Tokens and the node each is bound to; any other token is not valid.
class FakeAuthenticator final : public Authenticator {
 public:
  explicit FakeAuthenticator(std::map<std::string, std::string> nodes) : nodes_(std::move(nodes)) {}

  absl::Status Authenticate(const std::string& token, const std::string& node) override {
    std::lock_guard lock(mu_);
    ++calls_;
    auto it = nodes_.find(token);
    if (it == nodes_.end()) {
      return absl::UnauthenticatedError("not a valid token");
    }
    if (it->second != node) {
      return absl::PermissionDeniedError(
          absl::StrCat("node \"", node, "\" is not the node of this token (\"", it->second, "\")"));
    }
    return absl::OkStatus();
  }

  int calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  const std::map<std::string, std::string> nodes_;
  int calls_ = 0;
};

}  // namespace kmodd::server::testing
