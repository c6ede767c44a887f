#include <catch2/catch.hpp>

#include <optional>

#include "absl/strings/escaping.h"
#include "common/log.h"
#include "controller/certs/manager.h"
#include "controller/certs/pki.h"
#include "controller/kube/fake_client.h"
#include "controller/kube/json.h"

namespace kmodd::certs {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1800000000);

Stored Fresh(const ServingNames& names, absl::Time now = kNow,
             absl::Duration serving = kServingValidity) {
  auto ca = MakeCa("kmodd-ca", now, kCaValidity);
  REQUIRE(ca.ok());
  auto s = IssueServing(*ca, "kmodd-controller.ns.svc", names, now, serving);
  REQUIRE(s.ok());
  return Stored{*ca, *s};
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
  // The CA itself near its end, or unusable: all new.
  CHECK(Decide(s, names, kNow + kCaValidity - absl::Hours(24 * 29)) == Action::kNewCa);
  Stored broken = s;
  broken.ca.key_pem = Fresh(names).ca.key_pem;
  CHECK(Decide(broken, names, kNow) == Action::kNewCa);
  broken = s;
  broken.serving.cert_pem = "garbage";
  CHECK(Decide(broken, names, kNow) == Action::kReissueServing);
}

TEST_CASE("the certificate manager stores its pair once, reuses it, and publishes the CA") {
  kube::FakeKubeClient client;
  kube::FakeClock clock(kNow);
  Logger log(stderr, LogLevel::kError);
  const std::string vwc_path = kube::ResourcePath(
      "admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "", kWebhookConfigName);
  auto vwc = kube::ParseJson(R"({"apiVersion":"admissionregistration.k8s.io/v1",
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
  CHECK(kube::StringAt(*cm, {"data", "ca.crt"}) == b1->ca_pem);
  auto got = client.Get(vwc_path);
  REQUIRE(got.ok());
  for (const Value& h : got->Find("webhooks")->AsList()) {
    CHECK(kube::StringAt(h, {"clientConfig", "caBundle"}) == absl::Base64Escape(b1->ca_pem));
    CHECK(kube::StringAt(h, {"clientConfig", "url"}) == "https://127.0.0.1:1/validate-module");
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

}  // namespace
}  // namespace kmodd::certs
