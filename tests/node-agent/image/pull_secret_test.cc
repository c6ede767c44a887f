#include <catch2/catch.hpp>

#include "node-agent/image/pull_secret.h"

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
