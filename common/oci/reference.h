#pragma once

// Image references as Kubernetes users write them: [registry[:port]/]repository[:tag][@digest],
// with Docker Hub's defaults (docker.io, library/, latest).

#include <string>

#include "absl/status/statusor.h"

namespace kmodd::image {

struct ImageRef {
  std::string registry;    // host[:port] as written, "docker.io" by default
  std::string repository;  // e.g. library/ubuntu, intel/xe-driver
  std::string tag;         // empty when only a digest is given
  std::string digest;      // "sha256:<64 hex>" or empty

  // The host to connect to (Docker Hub's API lives on registry-1.docker.io).
  std::string ApiHost() const;
  // What a manifest request asks for: the digest when pinned, else the tag.
  const std::string& Reference() const { return digest.empty() ? tag : digest; }
  std::string ToString() const;
};

[[nodiscard]] absl::StatusOr<ImageRef> ParseImageRef(const std::string& text);

// "sha256:<64 lowercase hex>".
bool IsDigest(const std::string& s);

}  // namespace kmodd::image
