#include "common/oci/registry_client.h"

#include <random>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/http/status.h"
#include "common/http/url.h"
#include "common/oci/sha256.h"

namespace kmodd::image {

namespace {

constexpr size_t kMaxManifestBytes = 4 << 20;

bool Retryable(int status) {
  return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

void Backoff(std::chrono::milliseconds base, int attempt) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  const auto cap = std::chrono::milliseconds(5000);
  auto d = std::min(cap, base * (1 << attempt));
  std::uniform_int_distribution<int64_t> jitter(d.count() / 2, d.count());
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

// `Bearer realm="https://auth.example/token",service="registry",scope="repository:a:pull"`
std::map<std::string, std::string> ParseChallenge(const std::string& header, std::string& scheme) {
  std::map<std::string, std::string> params;
  const size_t sp = header.find(' ');
  scheme = header.substr(0, sp);
  if (sp == std::string::npos) {
    return params;
  }
  size_t i = sp + 1;
  while (i < header.size()) {
    while (i < header.size() && (header[i] == ' ' || header[i] == ',')) {
      ++i;
    }
    const size_t eq = header.find('=', i);
    if (eq == std::string::npos) {
      break;
    }
    std::string key = header.substr(i, eq - i);
    std::string value;
    i = eq + 1;
    if (i < header.size() && header[i] == '"') {
      ++i;
      while (i < header.size() && header[i] != '"') {
        if (header[i] == '\\' && i + 1 < header.size()) {
          ++i;
        }
        value.push_back(header[i++]);
      }
      ++i;
    } else {
      while (i < header.size() && header[i] != ',') {
        value.push_back(header[i++]);
      }
    }
    params[key] = value;
  }
  return params;
}

std::string QueryEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

}  // namespace

RegistryClient::RegistryClient(http::HttpClient& http, RegistryOptions options)
    : http_(http), options_(std::move(options)) {}

std::string RegistryClient::Url(const ImageRef& ref, const std::string& path) const {
  return absl::StrCat(options_.plain_http ? "http://" : "https://", ref.ApiHost(), "/v2/",
                      ref.repository, path);
}

absl::Status RegistryClient::Refused(const ImageRef& ref, const http::Response& resp) const {
  // After the challenge was answered: the registry refuses these credentials (or their
  // absence). Unauthenticated, not HTTP's PermissionDenied, for a 403 too: what to do is the
  // same (fix the pull secret or the account's access, then the retry succeeds), and
  // PermissionDenied is the kernel's "not permitted" (lockdown, signatures) to the agent.
  const std::string who =
      options_.credentials
          ? absl::StrCat("the credentials of the pull secret (user \"",
                         options_.credentials->username, "\")")
          : std::string("anonymous access");
  return absl::UnauthenticatedError(absl::StrCat(
      "registry ", ref.ApiHost(), " refused ", who, " for ", ref.repository,
      options_.credentials ? "; check imageRepoSecret and its access to the repository"
                           : "; set imageRepoSecret to a pull secret for this registry",
      ": ", http::StatusOf(resp).message()));
}

absl::Status RegistryClient::CheckRealm(const ImageRef& ref, const std::string& realm) const {
  absl::StatusOr<http::Url> to = http::ParseUrl(realm);
  absl::StatusOr<http::Url> registry = http::ParseUrl(Url(ref, ""));
  if (!to.ok() || !registry.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "registry ", ref.ApiHost(), " names the token realm \"", realm,
        "\", which is not an http(s) URL: the pull secret's credentials are not sent to it"));
  }
  // A host is its name as written: the operator chose this registry's transport for this
  // name, so a token service on another port of it is trusted alike.
  const bool same_host = absl::EqualsIgnoreCase(to->host, registry->host);
  std::string why;
  if (to->IsHttps()) {
    if (!same_host && options_.skip_tls_verify) {
      why = "it is on another host than the registry and TLS verification is off "
            "(insecureSkipTLSVerify)";
    }
  } else if (!same_host) {
    why = "it is plain HTTP on another host than the registry";
  } else if (!options_.plain_http) {
    why = "it is plain HTTP and the registry is not configured insecure (registryTLS.insecure)";
  }
  if (why.empty()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "registry ", ref.ApiHost(), " names the token realm ", realm,
      ": the pull secret's credentials are not sent there because ", why,
      "; kmodd sends them only over verified HTTPS, or in clear to the host of a registry "
      "configured insecure"));
}

absl::Status RegistryClient::Authorize(const ImageRef& ref, const http::Response& challenge) {
  const std::string key = ref.ApiHost() + "/" + ref.repository;
  for (const auto& header : challenge.headers.GetAll("WWW-Authenticate")) {
    std::string scheme;
    auto params = ParseChallenge(header, scheme);
    if (absl::AsciiStrToLower(scheme) == "basic") {
      if (!options_.credentials) {
        return absl::UnauthenticatedError(absl::StrCat(
            "registry ", ref.ApiHost(), " requires credentials; set imageRepoSecret"));
      }
      authorization_[key] = "Basic " + absl::Base64Escape(options_.credentials->username + ":" +
                                                          options_.credentials->password);
      return absl::OkStatus();
    }
    if (absl::AsciiStrToLower(scheme) == "bearer" && params.count("realm") != 0) {
      std::string url = params["realm"];
      // A challenge names several scopes space-separated (a cross-repository mount wants
      // pull on the source too); the token service takes each as its own scope parameter.
      std::vector<std::string> scopes = absl::StrSplit(params["scope"], ' ', absl::SkipEmpty());
      if (scopes.empty()) {
        scopes.push_back(absl::StrCat("repository:", ref.repository, ":pull"));
      }
      char sep = url.find('?') == std::string::npos ? '?' : '&';
      for (const std::string& one : scopes) {
        absl::StrAppend(&url, std::string(1, sep), "scope=", QueryEscape(one));
        sep = '&';
      }
      if (params.count("service") != 0) {
        absl::StrAppend(&url, "&service=", QueryEscape(params["service"]));
      }
      http::Request req;
      req.url = url;
      if (options_.credentials) {
        if (auto s = CheckRealm(ref, params["realm"]); !s.ok()) {
          return s;
        }
        req.headers.Set("Authorization",
                        "Basic " + absl::Base64Escape(options_.credentials->username + ":" +
                                                      options_.credentials->password));
      }
      auto resp = http_.Fetch(req);
      if (!resp.ok()) {
        return resp.status();
      }
      if (resp->status == 401 || resp->status == 403) {
        return absl::UnauthenticatedError(absl::StrCat(
            "token service ", params["realm"], " refused ",
            options_.credentials ? "the credentials" : "anonymous access",
            " (HTTP ", resp->status, "); check imageRepoSecret"));
      }
      if (resp->status != 200) {
        return absl::UnavailableError(
            absl::StrCat("token service ", params["realm"], " answered HTTP ", resp->status));
      }
      absl::StatusOr<std::string> token = ParseTokenResponse(resp->body, params["realm"]);
      if (!token.ok()) {
        return token.status();
      }
      authorization_[key] = "Bearer " + *token;
      return absl::OkStatus();
    }
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "registry ", ref.ApiHost(), " answered 401 without a challenge kmodd understands"));
}

absl::StatusOr<http::Response> RegistryClient::Send(const ImageRef& ref, http::Request req,
                                                    const http::BodyHandler* handler) {
  const std::string key = ref.ApiHost() + "/" + ref.repository;
  bool challenged = false;
  for (int attempt = 0;; ++attempt) {
    if (auto a = authorization_.find(key); a != authorization_.end()) {
      req.headers.Set("Authorization", a->second);
    }
    auto resp = handler != nullptr ? http_.Stream(req, *handler) : http_.Fetch(req);
    const bool last = attempt + 1 >= options_.attempts;
    if (!resp.ok()) {
      if (absl::IsUnavailable(resp.status()) && !last && handler == nullptr) {
        Backoff(options_.backoff, attempt);
        continue;
      }
      return resp.status();
    }
    if (resp->status == 401 && !challenged) {
      challenged = true;
      if (auto s = Authorize(ref, *resp); !s.ok()) {
        return s;
      }
      --attempt;  // answering a challenge is not a failed attempt
      continue;
    }
    if (Retryable(resp->status) && !last && handler == nullptr) {
      Backoff(options_.backoff, attempt);
      continue;
    }
    return resp;
  }
}

absl::StatusOr<std::pair<std::string, std::string>> RegistryClient::GetManifest(
    const ImageRef& ref, const std::string& reference) {
  http::Request req;
  req.url = Url(ref, "/manifests/" + reference);
  req.headers.Set("Accept", absl::StrJoin({kOciIndex, kOciManifest, kDockerList, kDockerManifest},
                                          ", "));
  req.max_body_bytes = kMaxManifestBytes;
  auto resp = Send(ref, req, nullptr);
  if (!resp.ok()) {
    return resp.status();
  }
  if (resp->status == 404) {
    return absl::NotFoundError(
        absl::StrCat("manifest ", ref.ApiHost(), "/", ref.repository, ":", reference, " not found"));
  }
  if (resp->status == 401 || resp->status == 403) {
    return Refused(ref, *resp);
  }
  if (auto s = http::StatusOf(*resp); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("manifest ", ref.ToString(), ": ", s.message()));
  }
  const std::string digest = Sha256::Of(resp->body);
  if (IsDigest(reference) && digest != reference) {
    return absl::DataLossError(absl::StrCat("manifest ", ref.ToString(), ": content digest ", digest,
                                            " does not match ", reference));
  }
  if (auto header = resp->headers.Get("Docker-Content-Digest");
      header && IsDigest(*header) && *header != digest) {
    return absl::DataLossError(absl::StrCat("manifest ", ref.ToString(), ": content digest ", digest,
                                            " does not match Docker-Content-Digest ", *header));
  }
  std::string type = resp->headers.Get("Content-Type").value_or("");
  type = type.substr(0, type.find(';'));
  return std::make_pair(resp->body, type);
}

absl::StatusOr<ResolvedImage> RegistryClient::Resolve(const ImageRef& ref, const Platform& p) {
  std::string reference = ref.Reference();
  for (int depth = 0; depth < 2; ++depth) {
    auto got = GetManifest(ref, reference);
    if (!got.ok()) {
      return got.status();
    }
    auto parsed = ParseManifest(got->first, got->second, p);
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(),
                          absl::StrCat(ref.ToString(), ": ", parsed.status().message()));
    }
    if (parsed->chosen) {
      reference = parsed->chosen->digest;
      continue;
    }
    parsed->image.manifest_digest = Sha256::Of(got->first);
    return parsed->image;
  }
  return absl::InvalidArgumentError(absl::StrCat(ref.ToString(), ": an index points to an index"));
}

absl::Status RegistryClient::FetchBlob(const ImageRef& ref, const Descriptor& blob,
                                       const std::function<absl::Status(const char*, size_t)>& on_data,
                                       std::atomic<int64_t>* progress) {
  Sha256 hash;
  int64_t received = 0;
  absl::Status consumer = absl::OkStatus();
  for (int attempt = 0;; ++attempt) {
    http::Request req;
    req.url = Url(ref, "/blobs/" + blob.digest);
    if (received > 0) {
      req.headers.Set("Range", absl::StrCat("bytes=", received, "-"));
    }
    int64_t skip = 0;
    http::BodyHandler handler;
    handler.on_head = [&](const http::Response& head) -> absl::Status {
      if (received > 0 && head.status == 200) {
        skip = received;  // the server ignored the Range: drop what we already have
      }
      return absl::OkStatus();
    };
    handler.on_data = [&](const char* data, size_t n) -> absl::Status {
      blob_bytes_ += static_cast<int64_t>(n);
      if (skip > 0) {
        const size_t drop = static_cast<size_t>(std::min<int64_t>(skip, static_cast<int64_t>(n)));
        skip -= static_cast<int64_t>(drop);
        data += drop;
        n -= drop;
      }
      if (n == 0) {
        return absl::OkStatus();
      }
      if (received + static_cast<int64_t>(n) > blob.size) {
        return consumer = absl::DataLossError(absl::StrCat(
            "blob ", blob.digest, " is larger than the manifest's size ", blob.size));
      }
      hash.Update(data, n);
      received += static_cast<int64_t>(n);
      if (progress != nullptr) {
        progress->fetch_add(static_cast<int64_t>(n));
      }
      if (auto s = on_data(data, n); !s.ok()) {
        consumer = s;
        return s;
      }
      return absl::OkStatus();
    };
    auto resp = Send(ref, req, &handler);
    const bool last = attempt + 1 >= options_.attempts;
    if (!consumer.ok()) {
      return consumer;
    }
    if (!resp.ok()) {
      if (absl::IsUnavailable(resp.status()) && !last) {
        Backoff(options_.backoff, attempt);
        continue;  // resume from `received`
      }
      return absl::Status(resp.status().code(),
                          absl::StrCat("blob ", blob.digest, ": ", resp.status().message()));
    }
    if (Retryable(resp->status) && !last) {
      Backoff(options_.backoff, attempt);
      continue;
    }
    if (resp->status == 404) {
      return absl::NotFoundError(absl::StrCat("blob ", blob.digest, " not found in ", ref.ToString()));
    }
    if (resp->status == 401 || resp->status == 403) {
      return Refused(ref, *resp);
    }
    if (auto s = http::StatusOf(*resp); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("blob ", blob.digest, ": ", s.message()));
    }
    // A response that ended as its headers said it would is the server's whole blob: if it
    // is short, asking again (with Range) cannot help. Only a cut connection (above) resumes.
    break;
  }
  if (received != blob.size) {
    return absl::DataLossError(absl::StrCat("blob ", blob.digest, " is truncated: ", received,
                                            " of ", blob.size, " bytes"));
  }
  if (const std::string got = hash.Digest(); got != blob.digest) {
    return absl::DataLossError(
        absl::StrCat("blob ", blob.digest, " has the wrong content (digest ", got, ")"));
  }
  return absl::OkStatus();
}

}  // namespace kmodd::image
