#include "controller/build/buildah_builder.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/json.h"
#include "common/oci/registry_http.h"
#include "common/oci/sha256.h"
#include "controller/build/process.h"

namespace kmodd::build {

namespace {

constexpr int kLogTailLines = 20;

// A private directory for one build, removed with everything in it when this goes.
class WorkDir {
 public:
  static absl::StatusOr<WorkDir> Make(const std::string& parent) {
    std::string tmpl = parent + "/kmodd-build.XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoStatus(errno, "cannot make a build directory in", parent);
    }
    return WorkDir(tmpl);
  }
  WorkDir(WorkDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  WorkDir(const WorkDir&) = delete;
  ~WorkDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  const std::string& path() const { return path_; }

 private:
  explicit WorkDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

std::map<std::string, std::string> LastByName(const std::vector<std::pair<std::string, std::string>>& args) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : args) {
    out[k] = v;
  }
  return out;
}

}  // namespace

std::string BuildHash(const BuildSpec& spec) {
  std::string text = absl::StrCat("dockerfile\n", spec.dockerfile.size(), "\n", spec.dockerfile, "\n");
  for (const auto& [k, v] : LastByName(spec.args)) {
    absl::StrAppend(&text, "arg\n", k.size(), "\n", k, "\n", v.size(), "\n", v, "\n");
  }
  if (spec.rebuild_trigger) {
    absl::StrAppend(&text, "trigger\n", *spec.rebuild_trigger, "\n");
  }
  return image::Sha256::Of(text);
}

absl::StatusOr<std::string> ImageBuildHash(const image::ImageRef& ref, const image::RegistryOptions& options) {
  auto http = image::NewRegistryHttpClient(options);
  if (!http.ok()) {
    return http.status();
  }
  image::RegistryClient registry(**http, options);
  absl::StatusOr<image::ResolvedImage> img = registry.Resolve(ref, image::Platform{});
  if (!img.ok()) {
    return img.status();
  }
  std::string config;
  if (absl::Status s = registry.FetchBlob(ref, img->config, [&](const char* p, size_t n) {
        config.append(p, n);
        return absl::OkStatus();
      });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<Value> v = ParseJson(config);
  if (!v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(ref.ToString(), ": its config: ", v.status().message()));
  }
  return StringAt(*v, {"config", "Labels", kBuildHashLabel});
}

absl::StatusOr<BuildResult> Build(const BuildRequest& req) {
  BuildResult result;
  result.hash = BuildHash(req.spec);
  const std::string target = req.target.ToString();
  if (absl::StatusOr<std::string> existing = ImageBuildHash(req.target, req.target_options); existing.ok()) {
    if (*existing == result.hash) {
      return result;  // built before from the same inputs
    }
  } else if (!absl::IsNotFound(existing.status())) {
    return absl::Status(existing.status().code(), absl::StrCat("containerImage ", target, ": ",
                                                               existing.status().message()));
  }
  absl::StatusOr<WorkDir> work = WorkDir::Make(req.work_parent);
  if (!work.ok()) {
    return work.status();
  }
  const std::string& w = work->path();
  std::filesystem::create_directories(w + "/context");
  if (absl::Status s = WriteFileAtomic(w + "/context/Dockerfile", req.spec.dockerfile, 0600); !s.ok()) {
    return s;
  }
  std::vector<std::string> common = {req.buildah, "--root", w + "/storage", "--runroot", w + "/run",
                                     "--storage-driver", "vfs"};
  std::vector<std::string> auth;
  if (!req.docker_config.empty()) {
    if (absl::Status s = WriteFileAtomic(w + "/auth.json", req.docker_config, 0600); !s.ok()) {
      return s;
    }
    auth = {"--authfile", w + "/auth.json"};
  }
  std::vector<std::string> bud = common;
  bud.insert(bud.end(), {"bud", "--isolation", "chroot", "--layers=false", "--timestamp", "0", "--label",
                         absl::StrCat(kBuildHashLabel, "=", result.hash),
                         req.spec.base_plain_http || req.spec.base_skip_verify ? "--tls-verify=false" : "--tls-verify=true"});
  bud.insert(bud.end(), auth.begin(), auth.end());
  for (const auto& [k, v] : LastByName(req.spec.args)) {
    bud.insert(bud.end(), {"--build-arg", absl::StrCat(k, "=", v)});
  }
  for (const std::string& v : req.volumes) {
    bud.insert(bud.end(), {"--volume", v});
  }
  bud.insert(bud.end(), {"-f", w + "/context/Dockerfile", "-t", "localhost/kmodd-build:latest", w + "/context"});
  const auto start = std::chrono::steady_clock::now();
  std::string last_log;
  std::chrono::milliseconds backoff = req.backoff;
  bool built = false;
  for (int attempt = 1; attempt <= std::max(1, req.attempts) && !built; ++attempt) {
    result.attempts = attempt;
    absl::StatusOr<ProcessResult> run = RunProcess(bud);
    if (!run.ok()) {
      return run.status();
    }
    if (run->exit_code == 0) {
      built = true;
      break;
    }
    last_log = Tail(run->output, kLogTailLines);
    if (attempt < req.attempts) {
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
  }
  if (!built) {
    return absl::AbortedError(absl::StrCat("building ", target, " failed ", result.attempts,
                                           result.attempts == 1 ? " time" : " times", "; buildah's log ends:\n",
                                           last_log));
  }
  std::vector<std::string> push = common;
  const bool plain = req.target_options.plain_http || req.target_options.skip_tls_verify;
  push.insert(push.end(), {"push", plain ? "--tls-verify=false" : "--tls-verify=true", "--digestfile", w + "/digest"});
  push.insert(push.end(), auth.begin(), auth.end());
  if (!req.target_options.ca_file.empty() && !plain) {
    std::filesystem::create_directories(w + "/certs");
    std::error_code ec;
    std::filesystem::copy_file(req.target_options.ca_file, w + "/certs/ca.crt", ec);
    if (ec) {
      return absl::FailedPreconditionError(absl::StrCat("--ca ", req.target_options.ca_file, ": ", ec.message()));
    }
    push.insert(push.end(), {"--cert-dir", w + "/certs"});
  }
  push.insert(push.end(), {"localhost/kmodd-build:latest", absl::StrCat("docker://", target)});
  absl::StatusOr<ProcessResult> pushed = RunProcess(push);
  if (!pushed.ok()) {
    return pushed.status();
  }
  if (pushed->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("pushing ", target, " failed; buildah's log ends:\n",
                                               Tail(pushed->output, kLogTailLines)));
  }
  absl::StatusOr<std::string> digest = ReadFile(w + "/digest");
  result.digest = digest.ok() ? *digest : "";
  result.built = true;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace kmodd::build
