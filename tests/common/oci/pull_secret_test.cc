#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/oci/pull_secret.h"

using kmodd::image::Credentials;
using kmodd::image::CredentialsFor;

TEST_CASE("pull secrets give the credentials of the image's registry") {
  // "user:s3cr:et" in base64; a password may contain ':'.
  const std::string secret = R"({"auths": {
      "127.0.0.1:5000": {"auth": "dXNlcjpzM2NyOmV0"},
      "https://index.docker.io/v1/": {"username": "hub", "password": "pw"}}})";
  auto local = CredentialsFor(secret, "127.0.0.1:5000");
  REQUIRE(local.ok());
  REQUIRE(local->has_value());
  CHECK(**local == Credentials{"user", "s3cr:et"});
  auto hub = CredentialsFor(secret, "docker.io");
  REQUIRE(hub.ok());
  CHECK(**hub == Credentials{"hub", "pw"});
  auto none = CredentialsFor(secret, "quay.io");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("a malformed pull secret is an error that says what is wrong") {
  CHECK(std::string(CredentialsFor("{", "r").status().message()).find("not valid JSON") !=
        std::string::npos);
  CHECK(std::string(CredentialsFor("{}", "r").status().message()).find("no \"auths\"") !=
        std::string::npos);
  CHECK(std::string(CredentialsFor(R"({"auths": {"r": {"auth": "!!"}}})", "r").status().message())
            .find("not base64") != std::string::npos);
  CHECK(std::string(CredentialsFor(R"({"auths": {"r": {"auth": "dXNlcg=="}}})", "r")
                        .status()
                        .message())
            .find("user:password") != std::string::npos);
}

// A pull secret is written by whoever can write Secrets in the Module's namespace: each
// hostile shape is an error naming the field, never an exception on the pull thread.
TEST_CASE("hostile pull secrets are refused naming the field") {
  struct Row {
    std::string secret;
    std::string error;  // "" = no error
  };
  const std::vector<Row> rows = {
      {R"({"auths": {"r": "dXNlcjpwdw=="}})", "pull secret: auths[\"r\"]: expected an object, got a string"},
      {R"({"auths": {"other": 7, "r": {"auth": "dXNlcjpwdw=="}}})",
       "pull secret: auths[\"other\"]: expected an object, got a number"},
      {R"({"auths": {"r": null}})", "pull secret: auths[\"r\"]: expected an object, got null"},
      {R"({"auths": {"r": []}})", "pull secret: auths[\"r\"]: expected an object, got a list"},
      {R"({"auths": {"r": {"auth": 12}}})", "pull secret: auths[\"r\"].auth: expected a string, got a number"},
      {R"({"auths": {"r": {"username": ["u"]}}})",
       "pull secret: auths[\"r\"].username: expected a string, got a list"},
      {R"({"auths": {"r": {"username": "u", "password": true}}})",
       "pull secret: auths[\"r\"].password: expected a string, got a boolean"},
      {R"({"auths": {"r": {}}})", "pull secret: auths[\"r\"] has no credentials"},
      {R"({"auths": {"r": {"auth": null, "username": "u", "password": "p"}}})", ""},
      {R"({"auths": {"r": {"auth": "x", "auth": "dTpwdw=="}}})", ""},  // the last one, as Go
      {R"({"auths": []})", "pull secret (.dockerconfigjson).auths: expected an object, got a list"},
      {R"({"auths": "x"})", "pull secret (.dockerconfigjson).auths: expected an object, got a string"},
      {R"({"auths": null})", "no \"auths\" object"},
      {R"([{"auths": {}}])", "pull secret (.dockerconfigjson): expected a JSON object, got a list"},
      {"\"x\"", "expected a JSON object, got a string"},
      {"12345678901234567890123", "int64 range"},
      {std::string(64, '{'), "not valid JSON"},
      {R"({"a":)" + std::string(40, '[') + std::string(40, ']') + "}", "nesting deeper than 32"},
      {"{\"auths\": {\"r\xff\": {}}}", "invalid UTF-8"},
  };
  for (const Row& row : rows) {
    INFO(row.secret);
    auto c = CredentialsFor(row.secret, "r");
    if (row.error.empty()) {
      REQUIRE(c.ok());
      REQUIRE(c->has_value());
      CHECK((*c)->username == "u");
    } else {
      REQUIRE_FALSE(c.ok());
      CHECK(c.status().code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(c.status().message()), Catch::Contains(row.error));
    }
  }
}
