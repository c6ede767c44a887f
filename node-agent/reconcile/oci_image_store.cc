#include "node-agent/reconcile/oci_image_store.h"

#include "absl/strings/str_cat.h"
#include "common/oci/pull_secret.h"
#include "common/oci/reference.h"

namespace kmodd::reconcile {

namespace {

std::string Relative(const std::string& abs) {
  std::string p = abs;
  while (!p.empty() && p.front() == '/') {
    p.erase(0, 1);
  }
  if (!p.empty() && p.back() != '/') {
    p.push_back('/');
  }
  return p;
}

}  // namespace

std::vector<std::string> KeepPrefixes(const api::NodeModuleSpec& m) {
  std::vector<std::string> keep = {absl::StrCat(Relative(m.config.modprobe.EffectiveDirName()),
                                                "lib/modules/", m.config.kernel_version, "/")};
  if (!m.config.modprobe.firmware_path.empty()) {
    keep.push_back(Relative(m.config.modprobe.firmware_path));
  }
  return keep;
}

OciImageStore::OciImageStore(image::ImageCache& cache, Options options)
    : cache_(cache), options_(std::move(options)) {}

absl::StatusOr<std::string> OciImageStore::RootFor(const api::NodeModuleSpec& m) {
  const std::string& image = m.config.container_image;
  if (image.rfind("dir:", 0) == 0) {
    return dirs_.RootFor(m);
  }
  image::PullRequest req;
  req.image = image;
  req.pull_policy = m.config.image_pull_policy;
  req.keep_prefixes = KeepPrefixes(m);
  req.platform = options_.platform;
  req.registry.ca_file = options_.ca_file;
  // NodeModulesConfig folds KMM's two registryTLS options into insecurePull: allow both.
  req.registry.skip_tls_verify = m.config.insecure_pull;
  req.registry.plain_http = false;
  if (!options_.pull_secret.empty() && image.rfind("oci-layout:", 0) != 0) {
    auto ref = image::ParseImageRef(image);
    if (!ref.ok()) {
      return ref.status();
    }
    auto creds = image::CredentialsFor(options_.pull_secret, ref->registry);
    if (!creds.ok()) {
      return creds.status();
    }
    req.registry.credentials = *creds;
  }
  auto pulled = cache_.Pull(req);
  // An insecure registry may speak plain HTTP: retry over it when TLS could not connect.
  if (!pulled.ok() && m.config.insecure_pull && image.rfind("oci-layout:", 0) != 0 &&
      (absl::IsUnavailable(pulled.status()) || absl::IsFailedPrecondition(pulled.status()))) {
    req.registry.plain_http = true;
    pulled = cache_.Pull(req);
  }
  if (!pulled.ok()) {
    return pulled.status();
  }
  in_use_.insert(pulled->root);
  digests_[pulled->root] = pulled->manifest_digest;
  return pulled->root;
}

std::string OciImageStore::DigestOf(const std::string& root) const {
  auto it = digests_.find(root);
  return it != digests_.end() ? it->second : "";
}

}  // namespace kmodd::reconcile
