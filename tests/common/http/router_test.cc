#include <catch2/catch.hpp>

#include <string>

#include "common/http/router.h"

namespace kmodd::http {
namespace {

Router Routes() {
  Router r;
  r.Add("GET", "/a", RunOn::kIoThread,
        [](const ServerRequest& q) { return ServerReply{200, "text/plain", "a " + q.target}; });
  r.Add("POST", "/a", RunOn::kWorkers,
        [](const ServerRequest& q) { return ServerReply{201, "text/plain", q.body}; });
  r.Add("PUT", "/b", RunOn::kWorkers, [](const ServerRequest&) { return ServerReply{}; });
  return r;
}

TEST_CASE("router finds a route by method and path, the query aside") {
  const Router r = Routes();
  CHECK(r.Route({"GET", "/a?x=1", "", ""}).body == "a /a?x=1");
  CHECK(r.Route({"POST", "/a", "hi", ""}).status == 201);
  CHECK(r.Route({"POST", "/a", "hi", ""}).body == "hi");
  CHECK(r.Find("GET", "/a").where == RunOn::kIoThread);
  CHECK(r.Find("POST", "/a?y").where == RunOn::kWorkers);
}

TEST_CASE("router answers 404 for an unknown path and 405 naming the methods a path takes") {
  const Router r = Routes();
  CHECK(r.Route({"GET", "/c", "", ""}).status == 404);
  CHECK(r.Route({"GET", "/a/", "", ""}).status == 404);  // exact paths only
  const ServerReply wrong = r.Route({"DELETE", "/a", "", ""});
  CHECK(wrong.status == 405);
  CHECK(wrong.body == "method not allowed: /a takes GET, POST\n");
  CHECK(r.Route({"GET", "/b", "", ""}).status == 405);
}

TEST_CASE("router answers HEAD with its GET route, without the body") {
  const Router r = Routes();
  const ServerReply head = r.Route({"HEAD", "/a", "", ""});
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(r.Route({"HEAD", "/b", "", ""}).status == 405);  // no GET there
}

TEST_CASE("router says whether any route needs the worker threads") {
  CHECK(Routes().NeedsWorkers());
  Router io_only;
  io_only.Add("GET", "/x", RunOn::kIoThread, [](const ServerRequest&) { return ServerReply{}; });
  CHECK_FALSE(io_only.NeedsWorkers());
}

}  // namespace
}  // namespace kmodd::http
