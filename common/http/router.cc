#include "common/http/router.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kmodd::http {

Router& Router::Add(const std::string& method, const std::string& path, RunOn where,
                    ServerHandler handler) {
  routes_[{path, method}] = Entry{where, std::move(handler)};
  return *this;
}

Router::Match Router::Find(const std::string& method, const std::string& target) const {
  const std::string path = target.substr(0, target.find('?'));
  const std::string as = method == "HEAD" ? "GET" : method;
  if (auto it = routes_.find({path, as}); it != routes_.end()) {
    return {&it->second.handler, it->second.where, {}};
  }
  std::vector<std::string> allowed;
  for (auto it = routes_.lower_bound({path, ""}); it != routes_.end() && it->first.first == path;
       ++it) {
    allowed.push_back(it->first.second);
  }
  if (allowed.empty()) {
    return {nullptr, RunOn::kIoThread, {404, "text/plain", "not found\n"}};
  }
  return {nullptr, RunOn::kIoThread,
          {405, "text/plain",
           absl::StrCat("method not allowed: ", path, " takes ", absl::StrJoin(allowed, ", "),
                        "\n")}};
}

ServerReply Router::Route(const ServerRequest& request) const {
  const Match m = Find(request.method, request.target);
  if (m.handler == nullptr) {
    return m.refusal;
  }
  ServerReply reply = (*m.handler)(request);
  if (request.method == "HEAD") {
    reply.body.clear();
  }
  return reply;
}

bool Router::NeedsWorkers() const {
  for (const auto& [key, entry] : routes_) {
    if (entry.where == RunOn::kWorkers) {
      return true;
    }
  }
  return false;
}

}  // namespace kmodd::http
