#include <catch2/catch.hpp>

#include <optional>

#include "absl/strings/escaping.h"
#include "tests/fakes/fake_clock.h"
#include "common/json.h"
#include "common/log.h"
#include "controller/certs/manager.h"
#include "controller/certs/pki.h"
#include "tests/fakes/fake_kube_client.h"

namespace kmodd::certs {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1800000000);

Stored Fresh(const ServingNames& names, absl::Time now = kNow,
             absl::Duration serving = kServingValidity) {
  auto ca = MakeCa("kmodd-ca", now, kCaValidity);
  REQUIRE(ca.ok());
  auto s = IssueServing(*ca, "kmodd-controller.ns.svc", names, now, serving);
  REQUIRE(s.ok());
  return Stored{*ca, *s, std::nullopt, ""};
}

// `s` with a serving certificate issued by its CA at `t`.
Stored ServingAt(Stored s, absl::Time t) {
  auto serving = IssueServing(s.ca, "kmodd-controller.ns.svc", WantedNames("ns", {}, {}), t,
                              kServingValidity);
  REQUIRE(serving.ok());
  s.serving = *serving;
  return s;
}

TEST_CASE("pki issues a serving certificate with its DNS and IP names, signed by the CA") {
  const ServingNames names = WantedNames("ns", {"extra.example"}, {"127.0.0.1"});
  const Stored s = Fresh(names);
  auto info = ReadCert(s.serving.cert_pem);
  REQUIRE(info.ok());
  CHECK(info->dns == std::vector<std::string>{"kmodd-controller.ns.svc",
                                              "kmodd-controller.ns.svc.cluster.local",
                                              "kmodd-webhook.ns.svc",
                                              "kmodd-webhook.ns.svc.cluster.local", "extra.example"});
  CHECK(info->ips == std::vector<std::string>{"127.0.0.1"});
  CHECK(info->not_after == kNow + kServingValidity);
  CHECK(Matches(s.serving, s.ca.cert_pem));
  const Stored other = Fresh(names);
  CHECK_FALSE(Matches(s.serving, other.ca.cert_pem));
  CHECK_FALSE(Matches(KeyPair{s.serving.cert_pem, other.serving.key_pem}, s.ca.cert_pem));
}

TEST_CASE("certificates are kept, re-issued or remade as their expiry and names say") {
  const ServingNames names = WantedNames("ns", {}, {"127.0.0.1"});
  const Stored s = Fresh(names);
  CHECK(Decide(std::nullopt, names, kNow) == Action::kNewCa);
  CHECK(Decide(s, names, kNow) == Action::kKeep);
  // 31 days before the serving certificate expires: kept; 29: re-issued from the same CA.
  CHECK(Decide(s, names, kNow + kServingValidity - absl::Hours(24 * 31)) == Action::kKeep);
  CHECK(Decide(s, names, kNow + kServingValidity - absl::Hours(24 * 29)) ==
        Action::kReissueServing);
  // A name it lacks (a new --cert-ip): re-issued.
  CHECK(Decide(s, WantedNames("ns", {}, {"10.0.0.1"}), kNow) == Action::kReissueServing);
  // The CA near its end: its successor is made first (91 days before: not yet; 89: yes).
  const absl::Time ca_end = kNow + kCaValidity;
  CHECK(Decide(ServingAt(s, ca_end - absl::Hours(24 * 100)), WantedNames("ns", {}, {}),
               ca_end - absl::Hours(24 * 91)) == Action::kKeep);
  CHECK(Decide(ServingAt(s, ca_end - absl::Hours(24 * 100)), WantedNames("ns", {}, {}),
               ca_end - absl::Hours(24 * 89)) == Action::kPrepareNextCa);
  // Expired, or unusable: all new at once (there is nothing left to overlap with).
  CHECK(Decide(s, names, kNow + kCaValidity + absl::Hours(1)) == Action::kNewCa);
  Stored broken = s;
  broken.ca.key_pem = Fresh(names).ca.key_pem;
  CHECK(Decide(broken, names, kNow) == Action::kNewCa);
  broken = s;
  broken.serving.cert_pem = "garbage";
  CHECK(Decide(broken, names, kNow) == Action::kReissueServing);
}

TEST_CASE("a successor CA is trusted for a week before it signs, its predecessor until it ends") {
  const ServingNames names = WantedNames("ns", {}, {});
  const absl::Time announced = kNow + kCaValidity - absl::Hours(24 * 89);
  Stored s = ServingAt(Fresh(names), announced - absl::Hours(24 * 10));
  auto successor = MakeCa("kmodd-ca", announced, kCaValidity);
  REQUIRE(successor.ok());
  s.next_ca = *successor;
  // Announced 6 days ago: keep signing with the current CA; 8 days: promote.
  CHECK(Decide(s, names, announced + absl::Hours(24 * 6)) == Action::kKeep);
  CHECK(Decide(s, names, announced + absl::Hours(24 * 8)) == Action::kPromoteNextCa);
  // Announced late, the CA already in its last 30 days: promote without the week.
  CHECK(Decide(s, names, kNow + kCaValidity - absl::Hours(24 * 29)) == Action::kPromoteNextCa);
  // A successor without its key is no successor: make another.
  Stored keyless = s;
  keyless.next_ca->key_pem = Fresh(names).ca.key_pem;
  CHECK(Decide(keyless, names, announced + absl::Hours(24 * 8)) == Action::kPrepareNextCa);
  // The bundle: current, successor, and a predecessor only until it expires.
  s.previous_ca_pem = Fresh(names, kNow - kCaValidity + absl::Hours(24)).ca.cert_pem;
  CHECK(TrustBundle(s, kNow) == s.ca.cert_pem + s.next_ca->cert_pem + s.previous_ca_pem);
  CHECK(TrustBundle(s, kNow + absl::Hours(48)) == s.ca.cert_pem + s.next_ca->cert_pem);
}

TEST_CASE("the certificate manager rotates its CA in two steps through the Secret") {
  kube::FakeKubeClient client;
  FakeClock clock(kNow);
  Logger log(stderr, LogLevel::kError);
  CertManager first(client, {"ns", {}, {}}, clock, log);
  CertManager second(client, {"ns", {}, {}}, clock, log);
  auto b1 = first.Ensure();
  REQUIRE(b1.ok());
  const std::string old_ca = b1->ca_pem;

  // The serving certificate renewed yearly, as the daily check does; 95 days before the CA
  // ends, the last renewal from it.
  clock.Advance(kCaValidity - absl::Hours(24 * 95));
  auto renewed = first.Ensure();
  REQUIRE(renewed.ok());
  CHECK(renewed->ca_pem == old_ca);
  // 89 days before the CA ends: a successor, trusted beside it; the serving pair unchanged.
  clock.Advance(absl::Hours(24 * 6));
  auto b2 = first.Ensure();
  REQUIRE(b2.ok());
  CHECK(b2->cert_pem == renewed->cert_pem);
  REQUIRE(b2->ca_pem.size() > old_ca.size());
  CHECK(b2->ca_pem.substr(0, old_ca.size()) == old_ca);
  const std::string next_ca = b2->ca_pem.substr(old_ca.size());
  CHECK(ReadCert(next_ca).ok());
  auto seen_by_second = second.Ensure();  // the other replica reads the same
  REQUIRE(seen_by_second.ok());
  CHECK(*seen_by_second == *b2);

  // A week later: the successor signs; both stay trusted.
  clock.Advance(kCaOverlap + absl::Hours(1));
  auto b3 = second.Ensure();
  REQUIRE(b3.ok());
  CHECK(Matches(KeyPair{b3->cert_pem, b3->key_pem}, next_ca));
  CHECK_FALSE(Matches(KeyPair{b3->cert_pem, b3->key_pem}, old_ca));
  CHECK(b3->ca_pem == next_ca + old_ca);
  auto b3_first = first.Ensure();
  REQUIRE(b3_first.ok());
  CHECK(*b3_first == *b3);

  // Past the old CA's end: only the new one.
  clock.Advance(absl::Hours(24 * 90));
  auto b4 = first.Ensure();
  REQUIRE(b4.ok());
  CHECK(b4->ca_pem == next_ca);
  CHECK(b4->cert_pem == b3->cert_pem);
}

TEST_CASE("the certificate manager stores its pair once, reuses it, and publishes the CA") {
  kube::FakeKubeClient client;
  FakeClock clock(kNow);
  Logger log(stderr, LogLevel::kError);
  const std::string vwc_path = kube::ResourcePath(
      "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "", kWebhookConfigName);
  auto vwc = ParseJson(R"({"apiVersion":"admissionregistration.k8s.io/v1",
      "kind":"ValidatingWebhookConfiguration","metadata":{"name":"kmodd-module-validation"},
      "webhooks":[{"name":"a","clientConfig":{"url":"https://127.0.0.1:1/validate-module"}},
                  {"name":"b","clientConfig":{"url":"https://127.0.0.1:1/validate-module"}}]})");
  REQUIRE(vwc.ok());
  REQUIRE(client.Create(kube::ResourcePath("admissionregistration.k8s.io/v1",
                                           "validatingwebhookconfigurations"),
                        *vwc)
              .ok());

  CertManager first(client, {"ns", {}, {"127.0.0.1"}}, clock, log);
  auto b1 = first.Ensure();
  REQUIRE(b1.ok());
  CertManager second(client, {"ns", {}, {"127.0.0.1"}}, clock, log);
  auto b2 = second.Ensure();
  REQUIRE(b2.ok());
  CHECK(*b1 == *b2);  // the second replica serves with the first one's pair

  REQUIRE(first.Publish(b1->ca_pem).ok());
  auto cm = client.Get(kube::ResourcePath("v1", "configmaps", "ns", kCaConfigMapName));
  REQUIRE(cm.ok());
  CHECK(StringAt(*cm, {"data", "ca.crt"}) == b1->ca_pem);
  auto got = client.Get(vwc_path);
  REQUIRE(got.ok());
  for (const Value& h : got->Find("webhooks")->AsList()) {
    CHECK(StringAt(h, {"clientConfig", "caBundle"}) == absl::Base64Escape(b1->ca_pem));
    CHECK(StringAt(h, {"clientConfig", "url"}) == "https://127.0.0.1:1/validate-module");
  }

  // Near the serving certificate's end: a new one from the same CA.
  clock.Advance(kServingValidity - absl::Hours(24 * 10));
  auto b3 = first.Ensure();
  REQUIRE(b3.ok());
  CHECK(b3->ca_pem == b1->ca_pem);
  CHECK(b3->cert_pem != b1->cert_pem);
  auto b4 = second.Ensure();
  REQUIRE(b4.ok());
  CHECK(*b4 == *b3);
}

TEST_CASE("the certificate manager fills the empty Secret and ConfigMap deploy/ ships, creating nothing") {
  kube::FakeKubeClient client;
  FakeClock clock(kNow);
  Logger log(stderr, LogLevel::kError);
  // deploy/base/certificates.yaml
  auto secret = ParseJson(R"({"apiVersion":"v1","kind":"Secret","type":"kubernetes.io/tls",
      "metadata":{"name":"kmodd-controller-tls","namespace":"ns"},
      "data":{"tls.crt":"","tls.key":""}})");
  auto cm = ParseJson(R"({"apiVersion":"v1","kind":"ConfigMap",
      "metadata":{"name":"kmodd-ca","namespace":"ns"}})");
  REQUIRE(secret.ok());
  REQUIRE(cm.ok());
  REQUIRE(client.Create(kube::ResourcePath("v1", "secrets", "ns"), *secret).ok());
  REQUIRE(client.Create(kube::ResourcePath("v1", "configmaps", "ns"), *cm).ok());
  const size_t before = client.calls().size();

  CertManager m(client, {"ns", {}, {}}, clock, log);
  auto b1 = m.Ensure();
  REQUIRE(b1.ok());
  REQUIRE(m.Publish(b1->ca_pem).ok());
  const std::vector<std::string> calls = client.calls();
  for (size_t i = before; i < calls.size(); ++i) {
    CHECK(calls[i].rfind("POST ", 0) != 0);  // RBAC grants no create on either
  }
  auto stored = client.Get(kube::ResourcePath("v1", "secrets", "ns", kSecretName));
  REQUIRE(stored.ok());
  CHECK(StringAt(*stored, {"type"}) == "kubernetes.io/tls");
  auto published = client.Get(kube::ResourcePath("v1", "configmaps", "ns", kCaConfigMapName));
  REQUIRE(published.ok());
  CHECK(StringAt(*published, {"data", "ca.crt"}) == b1->ca_pem);

  // The file applied again empties the serving pair: a new one from the same CA.
  REQUIRE(client.MergePatch(kube::ResourcePath("v1", "secrets", "ns", kSecretName),
                            *ParseJson(R"({"data":{"tls.crt":"","tls.key":""}})"))
              .ok());
  auto b2 = m.Ensure();
  REQUIRE(b2.ok());
  CHECK(b2->ca_pem == b1->ca_pem);
  CHECK(b2->cert_pem != b1->cert_pem);
}

TEST_CASE("without the Secret and with no right to create it, the controller says to apply deploy/") {
  kube::FakeKubeClient client;
  FakeClock clock(kNow);
  Logger log(stderr, LogLevel::kError);
  CertManager m(client, {"ns", {}, {}}, clock, log);
  client.FailNext(absl::NotFoundError("secrets \"kmodd-controller-tls\" not found"));
  client.FailNext(absl::PermissionDeniedError("403 Forbidden"));
  absl::StatusOr<Bundle> b = m.Ensure();
  REQUIRE_FALSE(b.ok());
  CHECK(absl::IsFailedPrecondition(b.status()));
  CHECK(b.status().message() ==
        "Secret ns/kmodd-controller-tls does not exist and the controller may not create "
        "Secrets (403 Forbidden): apply deploy/, which ships it empty");
}

}  // namespace
}  // namespace kmodd::certs
