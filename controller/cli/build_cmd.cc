// kmodd-controller build: KMM's in-cluster build for one kernel, run here with buildah (see
// controller/build/buildah_builder.h), then KMM's sign when the Module signs and a key is
// given. Standalone: the Dockerfile comes from a ConfigMap document beside the Modules.

#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/table.h"
#include "common/value.h"
#include "controller/build/buildah_builder.h"
#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"
#include "controller/placement/kernel_version.h"
#include "controller/placement/mapping.h"
#include "controller/sign/image_signer.h"
#include "common/oci/pull_secret.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller build --kernel RELEASE --modules PATH [--modules PATH...]\n"
    "                              [--docker-config FILE] [--ca FILE] [--volume SRC:DST[:ro]...]\n"
    "                              [--attempts N] [--work DIR] [--key FILE --cert FILE]\n"
    "                              [-o table|yaml|json]\n";

struct Row {
  std::string module;
  std::string image;
  std::string error;
  build::BuildResult result;
  int64_t signed_files = -1;  // -1: not signed
};

struct Inputs {
  std::string kernel;
  std::string docker_config;
  std::string ca;
  std::vector<std::string> volumes;
  int attempts = 3;
  std::string work = "/tmp";
  const sign::SigningKey* key = nullptr;
};

std::optional<Row> BuildOne(const api::Module& m, const api::Decoded& decoded, const Inputs& in) {
  Row row;
  row.module = absl::StrCat(m.metadata.namespace_, "/", m.metadata.name);
  placement::CompiledModule cm(m);
  auto plan = cm.PlanFor(in.kernel);
  if (!plan.ok()) {
    row.error = std::string(plan.status().message());
    return row;
  }
  if (!plan->has_value() || !(*plan)->build) {
    return std::nullopt;  // no mapping for the kernel, or it does not build
  }
  const placement::ResolvedConfig& config = (*plan)->config;
  const std::optional<api::Build>& b = (*plan)->build;
  row.image = config.container_image;
  if (!b->secrets.empty()) {
    row.error = "build.secrets: standalone builds mount no Secrets yet (give the files with --volume)";
    return row;
  }
  const std::string cm_name = b->dockerfile_config_map ? b->dockerfile_config_map->name : "";
  const api::ConfigMap* dockerfile_cm = nullptr;
  for (const auto& c : decoded.config_maps) {
    if (c.object.metadata.name == cm_name && c.object.metadata.namespace_ == m.metadata.namespace_) {
      dockerfile_cm = &c.object;
    }
  }
  if (dockerfile_cm == nullptr) {
    row.error = absl::StrCat("build.dockerfileConfigMap ", m.metadata.namespace_, "/", cm_name,
                             ": no such ConfigMap in --modules (give it beside the Module)");
    return row;
  }
  auto dockerfile = dockerfile_cm->data.find("dockerfile");
  if (dockerfile == dockerfile_cm->data.end() || dockerfile->second.empty()) {
    row.error = absl::StrCat("ConfigMap ", m.metadata.namespace_, "/", cm_name,
                             " has no data.dockerfile (KMM's key for the Dockerfile)");
    return row;
  }
  const placement::Vars* vars = &(*plan)->vars;
  build::BuildRequest req;
  req.spec.dockerfile = dockerfile->second;
  req.spec.args = *vars;  // KERNEL_FULL_VERSION, KERNEL_VERSION, ..., MOD_NAME, MOD_NAMESPACE
  for (const api::BuildArg& a : b->build_args) {
    auto value = placement::Substitute(a.value, *vars);
    if (!value.ok()) {
      row.error = absl::StrCat("build.buildArgs ", a.name, ": ", value.status().message());
      return row;
    }
    req.spec.args.emplace_back(a.name, *value);
  }
  req.spec.base_plain_http = b->base_image_registry_tls.insecure;
  req.spec.base_skip_verify = b->base_image_registry_tls.insecure_skip_tls_verify;
  req.spec.rebuild_trigger = m.spec.image_rebuild_trigger_generation;
  auto target = image::ParseImageRef(config.container_image);
  if (!target.ok()) {
    row.error = absl::StrCat("containerImage: ", target.status().message());
    return row;
  }
  req.target = *target;
  req.target_options.plain_http = config.registry_tls.insecure;
  req.target_options.skip_tls_verify = config.registry_tls.insecure_skip_tls_verify;
  req.target_options.ca_file = in.ca;
  if (!in.docker_config.empty()) {
    auto creds = image::CredentialsFor(in.docker_config, target->registry);
    if (!creds.ok()) {
      row.error = absl::StrCat("--docker-config: ", creds.status().message());
      return row;
    }
    req.target_options.credentials = *creds;
  }
  req.docker_config = in.docker_config;
  req.volumes = in.volumes;
  req.attempts = in.attempts;
  req.work_parent = in.work;
  absl::StatusOr<build::BuildResult> built = build::Build(req);
  if (!built.ok()) {
    row.error = std::string(built.status().message());
    return row;
  }
  row.result = *built;
  const std::optional<api::Sign>& sign = (*plan)->sign;
  if (sign && in.key != nullptr && built->built) {
    // KMM's order: the built image, then signed in place under the same name.
    sign::SignImageRequest s;
    s.unsigned_image = *target;
    s.unsigned_options = req.target_options;
    s.signed_image = *target;
    s.signed_options = req.target_options;
    for (const std::string& f : sign->files_to_sign) {
      auto file = placement::Substitute(f, *vars);
      if (!file.ok()) {
        row.error = absl::StrCat("sign.filesToSign \"", f, "\": ", file.status().message());
        return row;
      }
      s.files_to_sign.push_back(*file);
    }
    s.key = in.key;
    absl::StatusOr<sign::SignImageResult> signed_image = sign::SignImage(s);
    if (!signed_image.ok()) {
      row.error = absl::StrCat("built, then signing failed: ", signed_image.status().message());
      return row;
    }
    row.result.digest = signed_image->manifest_digest;
    row.signed_files = static_cast<int64_t>(signed_image->signed_files.size());
  }
  return row;
}

}  // namespace

int BuildCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Inputs in;
  std::vector<std::string> module_paths;
  std::string docker_config_file;
  std::string key_file;
  std::string cert_file;
  std::string format = "table";
  flags::FlagSet flags("kmodd-controller build", kUsage);
  flags.String("--kernel", "RELEASE", "the kernel to build for, as `uname -r` prints it", &in.kernel).Required();
  flags.Strings("--modules", "PATH", "Module manifests and the ConfigMaps their builds name, or directories", &module_paths);
  flags.String("--docker-config", "FILE", "registry credentials for the base images and the push", &docker_config_file);
  flags.String("--ca", "FILE", "extra CAs (PEM) for the registry pushed to", &in.ca);
  flags.Strings("--volume", "SRC:DST[:ro]",
                "bind-mounted into every RUN of the build (the host's toolchain or kernel headers)", &in.volumes);
  flags.Int("--attempts", "N", "tries of a failing build, with backoff from 2 s (default 3)", &in.attempts);
  flags.String("--work", "DIR", "where the private build directory goes (default /tmp)", &in.work);
  flags.String("--key", "FILE", "with --cert: sign the built image when the Module has sign", &key_file);
  flags.String("--cert", "FILE", "the signing key's certificate", &cert_file);
  flags.OneOf("-o,--output", "FORMAT", "table (default), yaml or json", &format, {"table", "yaml", "json"});
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit;
  }
  if (module_paths.empty()) {
    return flags.UsageError(err, "--modules is required (Module manifests and their ConfigMaps)");
  }
  if (in.attempts < 1) {
    return flags.UsageError(err, "--attempts: want at least 1");
  }
  if (key_file.empty() != cert_file.empty()) {
    return flags.UsageError(err, "--key and --cert go together");
  }
  std::optional<sign::SigningKey> key;
  if (!key_file.empty()) {
    absl::StatusOr<std::string> k = ReadFile(key_file);
    absl::StatusOr<std::string> c = ReadFile(cert_file);
    if (!k.ok() || !c.ok()) {
      err << "error: " << (!k.ok() ? k.status() : c.status()).message() << "\n";
      return 1;
    }
    absl::StatusOr<sign::SigningKey> loaded = sign::SigningKey::Load(*k, *c);
    if (!loaded.ok()) {
      err << "error: --key and --cert: " << loaded.status().message() << "\n";
      return 1;
    }
    key.emplace(std::move(*loaded));
    in.key = &*key;
  }
  if (!docker_config_file.empty()) {
    absl::StatusOr<std::string> text = ReadFile(docker_config_file);
    if (!text.ok()) {
      err << "error: --docker-config: " << text.status().message() << "\n";
      return 1;
    }
    in.docker_config = std::move(*text);
  }
  api::Decoded mods = DecodePaths(module_paths);
  mods.nodes.clear();
  ValidateDecoded(mods);
  PrintDiagnostics(mods, err);
  if (!mods.errors.empty()) {
    err << "error: nothing built: fix the errors above\n";
    return 1;
  }
  std::vector<Row> rows;
  for (const auto& m : mods.modules) {
    if (std::optional<Row> r = BuildOne(m.object, mods, in)) {
      rows.push_back(std::move(*r));
    }
  }
  if (rows.empty()) {
    err << "error: no Module in --modules " << JoinPaths(module_paths) << " builds on kernel " << in.kernel << "\n";
    return 1;
  }
  bool ok = true;
  for (const Row& r : rows) {
    ok = ok && r.error.empty();
  }
  if (format == "table") {
    std::vector<TableRow> table = {{"MODULE", "IMAGE", "RESULT"}};
    for (const Row& r : rows) {
      std::string result = r.error;
      if (r.error.empty()) {
        result = r.result.built ? absl::StrCat("built in ", absl::StrFormat("%.1f", r.result.seconds), " s (",
                                               r.result.attempts, r.result.attempts == 1 ? " attempt" : " attempts",
                                               ") ", r.result.digest.substr(0, 19))
                                : "up to date: built before from the same Dockerfile and arguments";
        if (r.signed_files >= 0) {
          absl::StrAppend(&result, ", ", r.signed_files, " modules signed");
        }
      }
      table.push_back({r.module, r.image, result});
    }
    out << RenderTable(table);
  } else {
    Value list = Value::EmptyList();
    for (const Row& r : rows) {
      Value v = Value::EmptyMap();
      v.Set("module", r.module);
      v.Set("image", r.image);
      if (r.error.empty()) {
        v.Set("built", r.result.built);
        v.Set("attempts", static_cast<int64_t>(r.result.attempts));
        v.Set("buildHash", r.result.hash);
        v.Set("digest", r.result.digest);
        v.Set("milliseconds", static_cast<int64_t>(r.result.seconds * 1000));
        if (r.signed_files >= 0) {
          v.Set("signedFiles", r.signed_files);
        }
      } else {
        v.Set("error", r.error);
      }
      list.Append(std::move(v));
    }
    Value doc = Value::EmptyMap();
    doc.Set("kernelVersion", in.kernel);
    doc.Set("modules", std::move(list));
    out << (format == "json" ? ToJson(doc) : ToYaml(doc));
  }
  return ok ? 0 : 1;
}

}  // namespace kmodd::cli
