#include "controller/certs/manager.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace kmodd::certs {

namespace {

bool Contains(const std::vector<std::string>& have, const std::vector<std::string>& want) {
  return std::all_of(want.begin(), want.end(), [&](const std::string& w) {
    return std::find(have.begin(), have.end(), w) != have.end();
  });
}

std::string Data(const Value& secret, std::string_view key) {
  std::string out;
  if (!absl::Base64Unescape(StringAt(secret, {"data", key}), &out)) {
    return "";
  }
  return out;
}

Value SecretObject(const std::string& ns, const Stored& s, const std::string& resource_version) {
  Value meta = Value::EmptyMap();
  meta.Set("name", kSecretName);
  meta.Set("namespace", ns);
  Value labels = Value::EmptyMap();
  labels.Set("app.kubernetes.io/name", "kmodd");
  labels.Set("app.kubernetes.io/component", "controller");
  meta.Set("labels", std::move(labels));
  if (!resource_version.empty()) {
    meta.Set("resourceVersion", resource_version);
  }
  Value data = Value::EmptyMap();
  data.Set("tls.crt", absl::Base64Escape(s.serving.cert_pem));
  data.Set("tls.key", absl::Base64Escape(s.serving.key_pem));
  data.Set("ca.crt", absl::Base64Escape(s.ca.cert_pem));
  data.Set("ca.key", absl::Base64Escape(s.ca.key_pem));
  if (s.next_ca) {
    data.Set("next-ca.crt", absl::Base64Escape(s.next_ca->cert_pem));
    data.Set("next-ca.key", absl::Base64Escape(s.next_ca->key_pem));
  }
  if (!s.previous_ca_pem.empty()) {
    data.Set("previous-ca.crt", absl::Base64Escape(s.previous_ca_pem));
  }
  Value secret = Value::EmptyMap();
  secret.Set("apiVersion", "v1");
  secret.Set("kind", "Secret");
  secret.Set("metadata", std::move(meta));
  secret.Set("type", "kubernetes.io/tls");
  secret.Set("data", std::move(data));
  return secret;
}

// A CA usable for signing: its certificate parses, is valid for more than `margin`, and
// its key is the certificate's.
bool UsableCa(const KeyPair& ca, absl::Time now, absl::Duration margin) {
  absl::StatusOr<CertInfo> info = ReadCert(ca.cert_pem);
  return info.ok() && info->not_after - now >= margin && Matches(ca, ca.cert_pem);
}

bool ServingNeedsReissue(const Stored& s, const ServingNames& want, absl::Time now) {
  absl::StatusOr<CertInfo> serving = ReadCert(s.serving.cert_pem);
  return !serving.ok() || serving->not_after - now < kRenewBefore ||
         !Matches(s.serving, s.ca.cert_pem) || !Contains(serving->dns, want.dns) ||
         !Contains(serving->ips, want.ips);
}

}  // namespace

std::string TrustBundle(const Stored& s, absl::Time now) {
  std::string out = s.ca.cert_pem;
  if (s.next_ca) {
    out += s.next_ca->cert_pem;
  }
  if (absl::StatusOr<CertInfo> prev = ReadCert(s.previous_ca_pem);
      prev.ok() && prev->not_after > now) {
    out += s.previous_ca_pem;
  }
  return out;
}

Action Decide(const std::optional<Stored>& stored, const ServingNames& want, absl::Time now) {
  if (!stored) {
    return Action::kNewCa;
  }
  // The CA must sign the next serving certificate (its key there) for a while yet; an
  // expired or broken one leaves nothing to overlap with.
  if (!UsableCa(stored->ca, now, absl::ZeroDuration())) {
    return Action::kNewCa;
  }
  const absl::Duration ca_left = ReadCert(stored->ca.cert_pem)->not_after - now;
  if (stored->next_ca && UsableCa(*stored->next_ca, now, kCaRolloverBefore)) {
    const absl::Time announced = ReadCert(stored->next_ca->cert_pem)->not_before;
    if (now - announced >= kCaOverlap || ca_left < kRenewBefore) {
      return Action::kPromoteNextCa;
    }
  } else if (ca_left < kCaRolloverBefore) {
    return Action::kPrepareNextCa;
  }
  return ServingNeedsReissue(*stored, want, now) ? Action::kReissueServing : Action::kKeep;
}

ServingNames WantedNames(const std::string& ns, const std::vector<std::string>& extra_dns,
                         const std::vector<std::string>& extra_ips) {
  ServingNames n;
  for (const char* service : {"kmodd-controller", "kmodd-webhook"}) {
    n.dns.push_back(absl::StrCat(service, ".", ns, ".svc"));
    n.dns.push_back(absl::StrCat(service, ".", ns, ".svc.cluster.local"));
  }
  n.dns.insert(n.dns.end(), extra_dns.begin(), extra_dns.end());
  n.ips = extra_ips;
  return n;
}

CertManager::CertManager(kube::KubeClient& client, CertOptions options, const Clock& clock,
                         Logger& log)
    : client_(client), options_(std::move(options)),
      names_(WantedNames(options_.ns, options_.extra_dns, options_.extra_ips)), clock_(clock),
      log_(log) {}

absl::StatusOr<std::optional<Stored>> CertManager::Read(std::string* resource_version) {
  absl::StatusOr<Value> secret =
      client_.Get(kube::ResourcePath("v1", "secrets", options_.ns, kSecretName));
  if (absl::IsNotFound(secret.status())) {
    resource_version->clear();
    return std::optional<Stored>();
  }
  if (!secret.ok()) {
    return secret.status();
  }
  *resource_version = StringAt(*secret, {"metadata", "resourceVersion"});
  Stored s{{Data(*secret, "ca.crt"), Data(*secret, "ca.key")},
           {Data(*secret, "tls.crt"), Data(*secret, "tls.key")},
           std::nullopt,
           Data(*secret, "previous-ca.crt")};
  if (std::string next = Data(*secret, "next-ca.crt"); !next.empty()) {
    s.next_ca = KeyPair{std::move(next), Data(*secret, "next-ca.key")};
  }
  return std::optional<Stored>(std::move(s));
}

absl::StatusOr<Bundle> CertManager::Ensure() {
  // A lost race (409 on create or update) means another replica stored a pair: read theirs.
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::string rv;
    absl::StatusOr<std::optional<Stored>> stored = Read(&rv);
    if (!stored.ok()) {
      return stored.status();
    }
    const absl::Time now = clock_.Now();
    const Action action = Decide(*stored, names_, now);
    if (action == Action::kKeep) {
      const Stored& s = **stored;
      return Bundle{TrustBundle(s, now), s.serving.cert_pem, s.serving.key_pem};
    }
    Stored next;
    bool reissue = true;
    switch (action) {
      case Action::kNewCa: {
        absl::StatusOr<KeyPair> ca = MakeCa("kmodd-ca", now, kCaValidity);
        if (!ca.ok()) {
          return ca.status();
        }
        next.ca = *std::move(ca);
        break;
      }
      case Action::kPrepareNextCa: {
        next = **stored;
        absl::StatusOr<KeyPair> successor = MakeCa("kmodd-ca", now, kCaValidity);
        if (!successor.ok()) {
          return successor.status();
        }
        next.next_ca = *std::move(successor);
        reissue = ServingNeedsReissue(next, names_, now);
        break;
      }
      case Action::kPromoteNextCa:
        next.ca = *(*stored)->next_ca;
        next.previous_ca_pem = (*stored)->ca.cert_pem;
        break;
      default:  // kReissueServing
        next = **stored;
        break;
    }
    if (reissue) {
      absl::StatusOr<KeyPair> serving = IssueServing(
          next.ca, absl::StrCat("kmodd-controller.", options_.ns, ".svc"), names_, now,
          kServingValidity);
      if (!serving.ok()) {
        return serving.status();
      }
      next.serving = *std::move(serving);
    }
    const Value object = SecretObject(options_.ns, next, rv);
    absl::Status st =
        rv.empty()
            ? client_.Create(kube::ResourcePath("v1", "secrets", options_.ns), object).status()
            : client_.Update(kube::ResourcePath("v1", "secrets", options_.ns, kSecretName), object)
                  .status();
    if (absl::IsAlreadyExists(st) || absl::IsAborted(st)) {
      log_.Info("another replica stored the certificates first; using theirs");
      continue;
    }
    if (rv.empty() && absl::IsPermissionDenied(st)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Secret ", options_.ns, "/", kSecretName, " does not exist and the controller may ",
          "not create Secrets (", st.message(), "): apply deploy/, which ships it empty"));
    }
    if (!st.ok()) {
      return st;
    }
    const char* what = "issued a new serving certificate";
    if (action == Action::kNewCa) {
      what = "made a new CA and serving certificate";
    } else if (action == Action::kPrepareNextCa) {
      what = "made the next CA: trusted beside the current one, signing a week from now";
    } else if (action == Action::kPromoteNextCa) {
      what = "the next CA signs the serving certificate now; the previous one stays trusted "
             "until it expires";
    }
    log_.Info(what, {{"secret", absl::StrCat(options_.ns, "/", kSecretName)}});
    return Bundle{TrustBundle(next, now), next.serving.cert_pem, next.serving.key_pem};
  }
  return absl::UnavailableError(
      absl::StrCat("Secret ", options_.ns, "/", kSecretName, " kept changing under us"));
}

absl::Status CertManager::Publish(const std::string& ca_pem) {
  if (absl::Status st = PublishConfigMap(ca_pem); !st.ok()) {
    return st;
  }
  return PublishWebhook(ca_pem);
}

absl::Status CertManager::PublishConfigMap(const std::string& ca_pem) {
  return kube::RetryOnConflict([&]() -> absl::Status {
    const std::string path = kube::ResourcePath("v1", "configmaps", options_.ns, kCaConfigMapName);
    absl::StatusOr<Value> cm = client_.Get(path);
    if (absl::IsNotFound(cm.status())) {
      Value meta = Value::EmptyMap();
      meta.Set("name", kCaConfigMapName);
      meta.Set("namespace", options_.ns);
      Value data = Value::EmptyMap();
      data.Set("ca.crt", ca_pem);
      Value obj = Value::EmptyMap();
      obj.Set("apiVersion", "v1");
      obj.Set("kind", "ConfigMap");
      obj.Set("metadata", std::move(meta));
      obj.Set("data", std::move(data));
      absl::Status st = client_.Create(kube::ResourcePath("v1", "configmaps", options_.ns), obj)
                            .status();
      if (absl::IsPermissionDenied(st)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "ConfigMap ", options_.ns, "/", kCaConfigMapName, " does not exist and the ",
            "controller may not create ConfigMaps (", st.message(),
            "): apply deploy/, which ships it empty"));
      }
      // Created by another replica meanwhile: compare theirs on the next attempt.
      return absl::IsAlreadyExists(st) ? absl::AbortedError("created meanwhile") : st;
    }
    if (!cm.ok()) {
      return cm.status();
    }
    if (StringAt(*cm, {"data", "ca.crt"}) == ca_pem) {
      return absl::OkStatus();
    }
    const Value* data = Lookup(*cm, {"data"});
    Value updated =
        With(*cm, "data", With(data != nullptr ? *data : Value::EmptyMap(), "ca.crt", ca_pem));
    return client_.Update(path, updated).status();  // RBAC: get and update, no patch
  });
}

absl::Status CertManager::PublishWebhook(const std::string& ca_pem) {
  return kube::RetryOnConflict([&]() -> absl::Status {
    const std::string path =
        kube::ResourcePath("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
                           "", kWebhookConfigName);
    absl::StatusOr<Value> vwc = client_.Get(path);
    if (absl::IsNotFound(vwc.status())) {
      log_.Info("no webhook configuration to give the CA to (yet)", {{"name", kWebhookConfigName}});
      return absl::OkStatus();
    }
    if (!vwc.ok()) {
      return vwc.status();
    }
    const std::string bundle = absl::Base64Escape(ca_pem);
    const Value* hooks = Lookup(*vwc, {"webhooks"});
    if (hooks == nullptr || !hooks->IsList()) {
      return absl::OkStatus();
    }
    Value next = Value::EmptyList();
    bool changed = false;
    for (const Value& h : hooks->AsList()) {
      const Value* cc = Lookup(h, {"clientConfig"});
      Value client_config = cc != nullptr ? *cc : Value::EmptyMap();
      if (StringAt(client_config, {"caBundle"}) != bundle) {
        changed = true;
        client_config = With(client_config, "caBundle", bundle);
      }
      next.Append(With(h, "clientConfig", std::move(client_config)));
    }
    if (!changed) {
      return absl::OkStatus();
    }
    // A merge patch replaces the whole list; the resourceVersion makes it fail (409)
    // rather than overwrite a concurrent change. RBAC grants get and patch on this name.
    Value meta = Value::EmptyMap();
    meta.Set("resourceVersion", StringAt(*vwc, {"metadata", "resourceVersion"}));
    Value patch = Value::EmptyMap();
    patch.Set("metadata", std::move(meta));
    patch.Set("webhooks", std::move(next));
    absl::Status st = client_.MergePatch(path, patch).status();
    if (st.ok()) {
      log_.Info("gave the CA to the webhook configuration", {{"name", kWebhookConfigName}});
    }
    return st;
  });
}

}  // namespace kmodd::certs
