#pragma once
// Throwaway CAs and the certificates they sign, for the TLS tests: a thin layer over the
// controller's own PKI (controller/certs/pki.h), so the tests trust certificates made the
// way the product makes them. Header-only (the unit binary compiles *_test.cc only); a
// failure throws, which Catch reports as the test's failure.

#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "controller/certs/pki.h"

namespace kmodd::http::testing {

struct Pki {
  std::string ca_pem;
  std::string cert_pem;  // the server certificate
  std::string key_pem;   // its key
};

namespace pki_detail {

template <class T>
T Must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    throw std::runtime_error("test PKI: " + v.status().ToString());
  }
  return *std::move(v);
}

// "IP:127.0.0.1,DNS:localhost" (OpenSSL's subjectAltName syntax, the tests' shorthand) as
// names; "" is none.
inline certs::ServingNames Names(const std::string& san) {
  certs::ServingNames names;
  for (const absl::string_view part : absl::StrSplit(san, ',', absl::SkipEmpty())) {
    absl::string_view name = part;
    if (absl::ConsumePrefix(&name, "DNS:")) {
      names.dns.emplace_back(name);
    } else if (absl::ConsumePrefix(&name, "IP:")) {
      names.ips.emplace_back(name);
    } else {
      throw std::runtime_error("test PKI: a SAN is DNS:name or IP:address, not " +
                               std::string(part));
    }
  }
  return names;
}

// Long enough for any test, short enough that a leaked certificate is worthless.
inline absl::Duration Validity() { return absl::Hours(24); }

}  // namespace pki_detail

// A throwaway CA that issues leaf certificates: servers and clients of mutual TLS.
class TestCa {
 public:
  explicit TestCa(const std::string& cn = "kmodd test CA")
      : ca_(pki_detail::Must(certs::MakeCa(cn, absl::Now(), pki_detail::Validity()))) {}

  // {certificate, key} PEM for `cn`, with subjectAltName `san` ("" = none) and extended
  // key usage `usage` ("serverAuth", "clientAuth").
  std::pair<std::string, std::string> Issue(const std::string& cn, const std::string& san,
                                            const std::string& usage) const {
    const certs::ServingNames names = pki_detail::Names(san);
    const absl::Time now = absl::Now();
    certs::KeyPair pair;
    if (usage == "serverAuth") {
      pair = pki_detail::Must(certs::IssueServing(ca_, cn, names, now, pki_detail::Validity()));
    } else if (usage == "clientAuth") {
      pair = pki_detail::Must(certs::IssueClient(ca_, cn, names, now, pki_detail::Validity()));
    } else {
      throw std::runtime_error("test PKI: usage is serverAuth or clientAuth, not " + usage);
    }
    return {std::move(pair.cert_pem), std::move(pair.key_pem)};
  }
  // The CA's certificate.
  const std::string& Pem() const { return ca_.cert_pem; }

 private:
  certs::KeyPair ca_;
};

// A CA, and a server certificate it signs whose subjectAltName is `san`
// (e.g. "IP:127.0.0.1,DNS:localhost").
inline Pki MakePki(const std::string& san) {
  const TestCa ca;
  auto [cert, key] = ca.Issue("kmodd test server", san, "serverAuth");
  return Pki{ca.Pem(), std::move(cert), std::move(key)};
}

}  // namespace kmodd::http::testing
