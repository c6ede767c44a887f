#pragma once

// ImageStore over the image cache: containerImage as an OCI reference (pulled from its
// registry) or oci-layout:PATH[:TAG], extracting only the driver tree for the node's
// kernel and the firmware path; dir:/path keeps working for trees already on the node.

#include <map>
#include <set>
#include <string>

#include "node-agent/image/cache.h"
#include "node-agent/reconcile/stores.h"

namespace kmodd::reconcile {

class OciImageStore : public ImageStore {
 public:
  struct Options {
    std::string ca_file;      // extra CAs for every registry
    std::string pull_secret;  // .dockerconfigjson content, empty for anonymous
    image::Platform platform;
  };
  OciImageStore(image::ImageCache& cache, Options options);

  absl::StatusOr<std::string> RootFor(const api::NodeModuleSpec& m) override;
  std::string DigestOf(const std::string& root) const override;

  // The trees handed out, for pruning the cache of everything else.
  const std::set<std::string>& in_use() const { return in_use_; }

 private:
  image::ImageCache& cache_;
  Options options_;
  DirImageStore dirs_;
  std::set<std::string> in_use_;
  std::map<std::string, std::string> digests_;  // root -> manifest digest
};

// "opt/lib/modules/<kernel>/" and "firmware/" for a module's dirName and firmwarePath.
std::vector<std::string> KeepPrefixes(const api::NodeModuleSpec& m);

}  // namespace kmodd::reconcile
