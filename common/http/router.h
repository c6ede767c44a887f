#pragma once

// What common/http's server (server.h) answers: routes by method and path to handlers.
// Pure: Route() answers a request without a socket, so each binary tests its routes alone.

#include <functional>
#include <map>
#include <string>
#include <utility>

namespace kmodd::http {

struct ServerRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // the path and the query
  std::string body;
  std::string peer;  // the client's address ("" when routed without a socket)
};

struct ServerReply {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

using ServerHandler = std::function<ServerReply(const ServerRequest&)>;

// Where the server runs a route's handler.
enum class RunOn {
  kIoThread,  // cheap and never blocking (in-memory reads): answered at once
  kWorkers,   // may take long or much memory: on the server's worker threads
};

class Router {
 public:
  // `path` is matched exactly, without the query. A GET route answers HEAD too, without
  // its body.
  Router& Add(const std::string& method, const std::string& path, RunOn where,
              ServerHandler handler);

  struct Match {
    const ServerHandler* handler = nullptr;  // null: `refusal` is the answer
    RunOn where = RunOn::kIoThread;
    ServerReply refusal;
  };
  // The route for `method` and `target`: 404 for an unknown path, 405 for a method the path
  // does not take.
  Match Find(const std::string& method, const std::string& target) const;

  // The whole answer on the calling thread, the handler's exceptions included (they
  // propagate): for tests.
  ServerReply Route(const ServerRequest& request) const;

  bool NeedsWorkers() const;

 private:
  struct Entry {
    RunOn where;
    ServerHandler handler;
  };
  std::map<std::pair<std::string, std::string>, Entry> routes_;  // by (path, method)
};

}  // namespace kmodd::http
