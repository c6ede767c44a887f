#include <catch2/catch.hpp>

#include "common/oci/reference.h"

using kmodd::image::ParseImageRef;

TEST_CASE("image references parse as Kubernetes users write them") {
  const std::string d = "sha256:" + std::string(64, 'a');
  struct Row {
    std::string text, registry, repository, tag, digest, api_host;
  };
  const Row rows[] = {
      {"ubuntu", "docker.io", "library/ubuntu", "latest", "", "registry-1.docker.io"},
      {"intel/xe:1.0", "docker.io", "intel/xe", "1.0", "", "registry-1.docker.io"},
      {"127.0.0.1:5000/kmm-ci-a:6.1.0-57-cloud-amd64", "127.0.0.1:5000", "kmm-ci-a",
       "6.1.0-57-cloud-amd64", "", "127.0.0.1:5000"},
      {"registry.example.com/intel/xe-driver:1.0-6.12.9", "registry.example.com", "intel/xe-driver",
       "1.0-6.12.9", "", "registry.example.com"},
      {"localhost/drv@" + d, "localhost", "drv", "", d, "localhost"},
      {"reg.example:443/a/b/c:t@" + d, "reg.example:443", "a/b/c", "t", d, "reg.example:443"},
  };
  for (const auto& r : rows) {
    INFO(r.text);
    auto ref = ParseImageRef(r.text);
    REQUIRE(ref.ok());
    CHECK(ref->registry == r.registry);
    CHECK(ref->repository == r.repository);
    CHECK(ref->tag == r.tag);
    CHECK(ref->digest == r.digest);
    CHECK(ref->ApiHost() == r.api_host);
    CHECK(ref->Reference() == (r.digest.empty() ? r.tag : r.digest));
  }
}

TEST_CASE("malformed image references are refused with what would be valid") {
  for (const char* bad : {"", "reg.example/", "reg.example/UPPER:1", "reg.example/a:b:c",
                          "reg.example/a@sha256:abc", "reg.example/a:"}) {
    INFO(bad);
    auto ref = ParseImageRef(bad);
    REQUIRE_FALSE(ref.ok());
    CHECK(std::string(ref.status().message()).find("expected [registry[:port]/]repository") !=
          std::string::npos);
  }
}
