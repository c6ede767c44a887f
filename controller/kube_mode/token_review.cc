#include "controller/kube_mode/token_review.h"

#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/json.h"

namespace kmodd::server {

namespace {

std::string Sha256(const std::string& s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

}  // namespace

absl::StatusOr<ReviewedToken> ParseTokenReview(const Value& review) {
  const Value* status = Lookup(review, {"status"});
  if (StringAt(review, {"kind"}) != "TokenReview" || status == nullptr) {
    return absl::InvalidArgumentError("the API server's answer is not a TokenReview with a status");
  }
  ReviewedToken t;
  const Value* ok = Lookup(*status, {"authenticated"});
  t.authenticated = ok != nullptr && ok->IsBool() && ok->AsBool();
  t.username = StringAt(*status, {"user", "username"});
  t.error = StringAt(*status, {"error"});
  if (const Value* aud = Lookup(*status, {"audiences"}); aud != nullptr && aud->IsList()) {
    for (const Value& a : aud->AsList()) {
      if (a.IsString()) {
        t.audiences.push_back(a.AsString());
      }
    }
  }
  const Value* node = Lookup(*status, {"user", "extra", kNodeNameExtra});
  if (node != nullptr && node->IsList() && !node->AsList().empty() &&
      node->AsList().front().IsString()) {
    t.node_name = node->AsList().front().AsString();
  }
  return t;
}

absl::Status CheckAgentToken(const ReviewedToken& t, const std::string& username,
                             const std::string& node) {
  if (!t.authenticated) {
    return absl::UnauthenticatedError(absl::StrCat(
        "the token is not valid for audience \"", kTokenAudience, "\"",
        t.error.empty() ? "" : absl::StrCat(": ", t.error)));
  }
  // The API server answers with the audiences the token and the request have in common:
  // a token for any other audience (one an agent's pod was given for something else) is
  // refused, even if the API server would accept it for itself.
  if (std::find(t.audiences.begin(), t.audiences.end(), kTokenAudience) == t.audiences.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "the token's review does not name the audience \"", kTokenAudience,
        "\": give the agent a projected token with `audience: ", kTokenAudience, "`"));
  }
  if (t.username != username) {
    return absl::PermissionDeniedError(absl::StrCat("the token is ", t.username, "'s, not ",
                                                    username, "'s: only agents may sync"));
  }
  if (t.node_name.empty()) {
    return absl::PermissionDeniedError(
        "the token is not bound to a pod on a node (use a projected token of the agent's pod)");
  }
  if (t.node_name != node) {
    return absl::PermissionDeniedError(absl::StrCat("node \"", node,
                                                    "\" is not the node of this token (\"",
                                                    t.node_name,
                                                    "\"): an agent can only report as itself"));
  }
  return absl::OkStatus();
}

absl::Time JwtExpiry(const std::string& token) {
  const size_t a = token.find('.');
  const size_t b = a == std::string::npos ? a : token.find('.', a + 1);
  std::string payload;
  if (b == std::string::npos || !absl::WebSafeBase64Unescape(token.substr(a + 1, b - a - 1), &payload)) {
    return absl::InfiniteFuture();
  }
  absl::StatusOr<Value> claims = ParseJson(payload);
  if (!claims.ok()) {
    return absl::InfiniteFuture();
  }
  const Value* exp = Lookup(*claims, {"exp"});
  return exp != nullptr && exp->IsInt() ? absl::FromUnixSeconds(exp->AsInt())
                                        : absl::InfiniteFuture();
}

TokenReviewAuthenticator::TokenReviewAuthenticator(kube::KubeClient& client, const std::string& ns,
                                                   const Clock& clock)
    : client_(client), username_(absl::StrCat("system:serviceaccount:", ns, ":kmodd-agent")),
      clock_(clock) {}

absl::StatusOr<ReviewedToken> TokenReviewAuthenticator::Review(const std::string& token) {
  const std::string key = Sha256(token);
  const absl::Time now = clock_.Now();
  {
    std::lock_guard lock(mu_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      if (it->second.until > now) {
        return it->second.token;
      }
      cache_.erase(it);
    }
  }
  Value spec = Value::EmptyMap();
  spec.Set("token", token);
  spec.Set("audiences", Value(Value::List{kTokenAudience}));
  Value review = Value::EmptyMap();
  review.Set("apiVersion", "authentication.k8s.io/v1");
  review.Set("kind", "TokenReview");
  review.Set("spec", std::move(spec));
  absl::StatusOr<Value> answer =
      client_.Create("/apis/authentication.k8s.io/v1/tokenreviews", review);
  if (!answer.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot check the agent's token: ", answer.status().message()));
  }
  absl::StatusOr<ReviewedToken> t = ParseTokenReview(*answer);
  if (!t.ok()) {
    return t;
  }
  const absl::Time until =
      t->authenticated ? std::min(now + kCacheFor, JwtExpiry(token)) : now + kNegativeFor;
  std::lock_guard lock(mu_);
  if (cache_.size() >= kMaxCached) {
    for (auto it = cache_.begin(); it != cache_.end();) {
      it = it->second.until <= now ? cache_.erase(it) : std::next(it);
    }
    if (cache_.size() >= kMaxCached) {
      cache_.clear();
    }
  }
  cache_[key] = Cached{*t, until};
  return t;
}

absl::StatusOr<absl::Time> TokenReviewAuthenticator::Authenticate(const std::string& token,
                                                                  const std::string& node) {
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "no client certificate and no bearer token: an agent must show one");
  }
  absl::StatusOr<ReviewedToken> t = Review(token);
  if (!t.ok()) {
    return t.status();
  }
  if (absl::Status st = CheckAgentToken(*t, username_, node); !st.ok()) {
    return st;
  }
  return JwtExpiry(token);
}

}  // namespace kmodd::server
