#pragma once

// The controller's own small PKI (OpenSSL's C API): an ECDSA P-256 CA, and serving
// certificates it signs for the Sync server and the admission webhook (and client
// certificates, which the tests' mutual TLS peers use: tests/common/http/test_pki.h). PEM in
// and out; no OpenSSL type leaves pki.cc.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kmodd::certs {

struct KeyPair {
  std::string cert_pem;
  std::string key_pem;
};

struct ServingNames {
  std::vector<std::string> dns;
  std::vector<std::string> ips;  // IPv4 or IPv6 literals
};

// A self-signed CA (basicConstraints CA:TRUE, keyCertSign), valid from `now` - 1 h (clock
// skew) for `validity`.
[[nodiscard]] absl::StatusOr<KeyPair> MakeCa(const std::string& common_name, absl::Time now,
                                             absl::Duration validity);

// A serving certificate (serverAuth, digitalSignature) for `names`, signed by `ca`.
[[nodiscard]] absl::StatusOr<KeyPair> IssueServing(const KeyPair& ca, const std::string& common_name,
                                                   const ServingNames& names, absl::Time now,
                                                   absl::Duration validity);

// A client certificate (clientAuth, digitalSignature) for `common_name`, with `names` (none
// is fine) as its subject alternative names, signed by `ca`: a mutual TLS peer that a
// server identifies by its CN or SAN.
[[nodiscard]] absl::StatusOr<KeyPair> IssueClient(const KeyPair& ca, const std::string& common_name,
                                                  const ServingNames& names, absl::Time now,
                                                  absl::Duration validity);

struct CertInfo {
  absl::Time not_before;
  absl::Time not_after;
  std::vector<std::string> dns;
  std::vector<std::string> ips;
};

// The validity and subject alternative names of the first certificate in `pem`.
[[nodiscard]] absl::StatusOr<CertInfo> ReadCert(const std::string& pem);

// True when `cert_pem` is signed by `ca_pem` and `key_pem` is the key of `cert_pem`.
bool Matches(const KeyPair& pair, const std::string& ca_pem);

}  // namespace kmodd::certs
