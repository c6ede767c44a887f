#include "controller/kube/config.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/file.h"

namespace kmodd::kube {
namespace {

// Reading one kubeconfig: every error names the file and the field.
class KubeconfigReader {
 public:
  explicit KubeconfigReader(std::string path)
      : path_(std::move(path)), dir_(std::filesystem::path(path_).parent_path().string()) {}

  absl::StatusOr<KubeConfig> Read(std::string_view wanted_context) {
    absl::StatusOr<std::string> text = ReadFile(path_);
    if (!text.ok()) {
      return text.status();
    }
    YAML::Node root;
    try {
      root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path_, ": ", e.what()));
    }
    if (!root.IsMap()) {
      return Error("", "not a mapping");
    }
    std::string context_name(wanted_context);
    if (context_name.empty()) {
      absl::StatusOr<std::string> current = Scalar(root, "current-context", "current-context");
      if (!current.ok()) {
        return current.status();
      }
      if (current->empty()) {
        return Error("current-context", "not set, and no context was asked for");
      }
      context_name = *current;
    }
    absl::StatusOr<YAML::Node> context = Named(root, "contexts", "context", context_name);
    if (!context.ok()) {
      return context.status();
    }
    const std::string ctx_field = absl::StrCat("contexts[", context_name, "].context");
    KubeConfig config;
    std::string cluster_name;
    std::string user_name;
    absl::Status st = Get(*context, ctx_field, "cluster", cluster_name);
    if (st.ok()) {
      st = Get(*context, ctx_field, "user", user_name);
    }
    if (st.ok()) {
      st = Get(*context, ctx_field, "namespace", config.ns);
    }
    if (!st.ok()) {
      return st;
    }
    if (cluster_name.empty()) {
      return Error(absl::StrCat(ctx_field, ".cluster"), "missing");
    }
    if (config.ns.empty()) {
      config.ns = "default";
    }
    if (st = ReadCluster(root, cluster_name, config); !st.ok()) {
      return st;
    }
    if (!user_name.empty()) {
      if (st = ReadUser(root, user_name, config); !st.ok()) {
        return st;
      }
    }
    return config;
  }

 private:
  absl::Status Error(std::string_view field, std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        "kubeconfig ", path_, field.empty() ? "" : ": ", std::string(field), ": ",
        std::string(what)));
  }

  absl::StatusOr<std::string> Scalar(const YAML::Node& map, const char* key,
                                     std::string_view field) const {
    const YAML::Node n = map[key];
    if (!n || n.IsNull()) {
      return std::string();
    }
    if (!n.IsScalar()) {
      return Error(field, "not a string");
    }
    return n.Scalar();
  }

  absl::Status Get(const YAML::Node& map, std::string_view parent, const char* key,
                   std::string& out) const {
    absl::StatusOr<std::string> v = Scalar(map, key, absl::StrCat(std::string(parent), ".", key));
    if (!v.ok()) {
      return v.status();
    }
    out = *std::move(v);
    return absl::OkStatus();
  }

  // The `inner` mapping of the entry named `name` in the list `list`.
  absl::StatusOr<YAML::Node> Named(const YAML::Node& root, const char* list, const char* inner,
                                   const std::string& name) const {
    const YAML::Node entries = root[list];
    if (entries && !entries.IsNull() && !entries.IsSequence()) {
      return Error(list, "not a list");
    }
    if (entries) {
      for (const YAML::Node& entry : entries) {
        if (entry.IsMap() && entry["name"] && entry["name"].IsScalar() &&
            entry["name"].Scalar() == name) {
          const YAML::Node body = entry[inner];
          if (!body || !body.IsMap()) {
            return Error(absl::StrCat(list, "[", name, "].", inner), "missing or not a mapping");
          }
          return body;
        }
      }
    }
    return Error(list, absl::StrCat("no entry named \"", name, "\""));
  }

  // `data_key` (base64 PEM) or `file_key` (a path), into `out`.
  absl::Status DataOrFile(const YAML::Node& map, std::string_view parent, const char* data_key,
                          const char* file_key, std::string& out) const {
    std::string data;
    std::string file;
    if (absl::Status st = Get(map, parent, data_key, data); !st.ok()) {
      return st;
    }
    if (absl::Status st = Get(map, parent, file_key, file); !st.ok()) {
      return st;
    }
    if (!data.empty()) {
      if (!absl::Base64Unescape(data, &out) || out.empty()) {
        return Error(absl::StrCat(std::string(parent), ".", data_key), "not valid base64");
      }
      return absl::OkStatus();
    }
    if (!file.empty()) {
      absl::StatusOr<std::string> content = ReadFile(Resolve(file));
      if (!content.ok()) {
        return Error(absl::StrCat(std::string(parent), ".", file_key),
                     std::string(content.status().message()));
      }
      out = *std::move(content);
    }
    return absl::OkStatus();
  }

  std::string Resolve(const std::string& file) const {
    if (file.empty() || file[0] == '/' || dir_.empty()) {
      return file;
    }
    return absl::StrCat(dir_, "/", file);
  }

  absl::Status ReadCluster(const YAML::Node& root, const std::string& name, KubeConfig& config) {
    absl::StatusOr<YAML::Node> cluster = Named(root, "clusters", "cluster", name);
    if (!cluster.ok()) {
      return cluster.status();
    }
    const std::string field = absl::StrCat("clusters[", name, "].cluster");
    if (absl::Status st = Get(*cluster, field, "server", config.server); !st.ok()) {
      return st;
    }
    if (config.server.empty()) {
      return Error(absl::StrCat(field, ".server"), "missing");
    }
    if (absl::Status st = DataOrFile(*cluster, field, "certificate-authority-data",
                                     "certificate-authority", config.ca_pem);
        !st.ok()) {
      return st;
    }
    std::string insecure;
    if (absl::Status st = Get(*cluster, field, "insecure-skip-tls-verify", insecure); !st.ok()) {
      return st;
    }
    if (!insecure.empty() && insecure != "true" && insecure != "false") {
      return Error(absl::StrCat(field, ".insecure-skip-tls-verify"), "not true or false");
    }
    config.insecure_skip_tls_verify = insecure == "true";
    return absl::OkStatus();
  }

  absl::Status ReadUser(const YAML::Node& root, const std::string& name, KubeConfig& config) {
    absl::StatusOr<YAML::Node> user = Named(root, "users", "user", name);
    if (!user.ok()) {
      return user.status();
    }
    const std::string field = absl::StrCat("users[", name, "].user");
    for (const char* unsupported : {"exec", "auth-provider", "username", "password"}) {
      if ((*user)[unsupported]) {
        return absl::UnimplementedError(
            absl::StrCat("kubeconfig ", path_, ": ", field, ".", unsupported,
                         ": not supported by kmodd (use a token, a token file or a client "
                         "certificate)"));
      }
    }
    absl::Status st = Get(*user, field, "token", config.token);
    std::string token_file;
    if (st.ok()) {
      st = Get(*user, field, "tokenFile", token_file);
    }
    if (st.ok()) {
      st = DataOrFile(*user, field, "client-certificate-data", "client-certificate",
                      config.client_cert_pem);
    }
    if (st.ok()) {
      st = DataOrFile(*user, field, "client-key-data", "client-key", config.client_key_pem);
    }
    if (!st.ok()) {
      return st;
    }
    if (!token_file.empty() && config.token.empty()) {
      config.token_file = Resolve(token_file);
    }
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      return Error(field, config.client_cert_pem.empty()
                              ? "client-key(-data) without client-certificate(-data)"
                              : "client-certificate(-data) without client-key(-data)");
    }
    return absl::OkStatus();
  }

  const std::string path_;
  const std::string dir_;
};

std::string Trimmed(const std::string& s) {
  return std::string(absl::StripAsciiWhitespace(s));
}

}  // namespace

absl::StatusOr<KubeConfig> LoadKubeconfig(const std::string& path, std::string_view context) {
  return KubeconfigReader(path).Read(context);
}

absl::StatusOr<KubeConfig> InClusterConfig(const std::string& dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    return absl::FailedPreconditionError(
        "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are "
        "not set");
  }
  KubeConfig config;
  const std::string h(host);
  config.server = h.find(':') != std::string::npos ? absl::StrCat("https://[", h, "]:", port)
                                                   : absl::StrCat("https://", h, ":", port);
  config.token_file = dir + "/token";
  absl::StatusOr<std::string> token = ReadFile(config.token_file);
  if (!token.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster service account token: ", token.status().message()));
  }
  absl::StatusOr<std::string> ca = ReadFile(dir + "/ca.crt");
  if (!ca.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("in-cluster CA: ", ca.status().message()));
  }
  config.ca_pem = *std::move(ca);
  absl::StatusOr<std::string> ns = ReadFile(dir + "/namespace");
  config.ns = ns.ok() && !Trimmed(*ns).empty() ? Trimmed(*ns) : "default";
  return config;
}

absl::StatusOr<std::string> TokenSource::Token() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_.empty()) {
    return token_;
  }
  const absl::Time now = clock_.Now();
  if (read_ && now - checked_ < kRecheck) {
    return token_;
  }
  checked_ = now;
  struct stat st {};
  if (::stat(file_.c_str(), &st) != 0) {
    const absl::Status error = ErrnoStatus(errno, "stat token file", file_);
    return read_ ? absl::StatusOr<std::string>(token_) : error;
  }
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
                           static_cast<int64_t>(st.st_mtim.tv_nsec);
  if (read_ && mtime_ns == mtime_ns_) {
    return token_;
  }
  absl::StatusOr<std::string> content = ReadFile(file_);
  if (!content.ok() || Trimmed(*content).empty()) {
    if (read_) {
      return token_;
    }
    return content.ok() ? absl::UnauthenticatedError(absl::StrCat("token file ", file_, " is empty"))
                        : content.status();
  }
  token_ = Trimmed(*std::move(content));
  mtime_ns_ = mtime_ns;
  read_ = true;
  return token_;
}

void TokenSource::Invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  checked_ = absl::InfinitePast();
  mtime_ns_ = -1;
}

}  // namespace kmodd::kube
