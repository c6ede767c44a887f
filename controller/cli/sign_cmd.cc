// kmodd-controller sign: KMM's sign for one kernel, run here instead of in a Job. For each
// Module whose mapping for the kernel has `sign` (or whose container has), the unsignedImage
// is read, its filesToSign signed with the key, and the result pushed as the mapping's
// containerImage. See controller/sign/image_signer.h.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/file.h"
#include "common/json.h"
#include "common/flags.h"
#include "common/oci/pull_secret.h"
#include "common/table.h"
#include "common/value.h"
#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"
#include "controller/placement/kernel_version.h"
#include "controller/placement/mapping.h"
#include "controller/kube/config.h"
#include "controller/kube/rest_client.h"
#include "controller/kube_mode/kube_source.h"
#include "controller/kube_mode/pull_secret.h"
#include "controller/sign/image_signer.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller sign --kernel RELEASE --modules PATH [--modules PATH...]\n"
    "                             --key FILE --cert FILE [--docker-config FILE]\n"
    "                             [--hash ALGORITHM] [--all-modules] [--ca FILE] [-o table|yaml|json]\n"
    "       kmodd-controller sign --kernel RELEASE --kubernetes [--kubeconfig FILE]\n"
    "                             [--hash ALGORITHM] [--all-modules] [--ca FILE] [-o table|yaml|json]\n";

struct Row {
  std::string module;
  std::string unsigned_image;
  std::string image;
  std::string error;  // "" when signed
  std::string signer;
  sign::SignImageResult result;
};

// Registry options for `ref` with `tls` and the credentials the docker config has for it.
absl::StatusOr<image::RegistryOptions> OptionsFor(const image::ImageRef& ref, const api::TlsOptions& tls,
                                                  const std::string& ca, const std::string& docker_config) {
  image::RegistryOptions o;
  o.plain_http = tls.insecure;
  o.skip_tls_verify = tls.insecure_skip_tls_verify;
  o.ca_file = ca;
  if (!docker_config.empty()) {
    auto creds = image::CredentialsFor(docker_config, ref.registry);
    if (!creds.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--docker-config: ", creds.status().message()));
    }
    o.credentials = *creds;
  }
  return o;
}

// What signing one Module takes: the key, and the registries' credentials.
struct SignCredentials {
  const sign::SigningKey* key = nullptr;
  std::string docker_config;
  std::string error;  // why there are none
};
using CredentialsFor = std::function<SignCredentials(const api::Module&, const api::Sign&)>;

// Signs one Module's image for `kernel`; nullopt when the Module does not sign on it.
std::optional<Row> SignOne(const api::Module& m, const std::string& kernel, const CredentialsFor& credentials,
                           bool all_modules, const std::string& ca) {
  Row row;
  row.module = absl::StrCat(m.metadata.namespace_, "/", m.metadata.name);
  placement::CompiledModule cm(m);
  auto plan = cm.PlanFor(kernel);
  if (!plan.ok()) {
    row.error = std::string(plan.status().message());
    return row;
  }
  if (!plan->has_value() || !(*plan)->sign) {
    return std::nullopt;  // no mapping for the kernel, or it does not sign
  }
  const placement::ResolvedConfig& config = (*plan)->config;
  const std::optional<api::Sign>& sign = (*plan)->sign;
  const api::Sign* s = &*sign;
  row.image = config.container_image;
  const SignCredentials creds = credentials(m, *s);
  if (!creds.error.empty()) {
    row.error = creds.error;
    return row;
  }
  const std::string& docker_config = creds.docker_config;
  const placement::Vars* vars = &(*plan)->vars;
  auto unsigned_image = placement::Substitute(s->unsigned_image, *vars);
  if (!unsigned_image.ok()) {
    row.error = absl::StrCat("sign.unsignedImage \"", s->unsigned_image, "\": ", unsigned_image.status().message());
    return row;
  }
  row.unsigned_image = *unsigned_image;
  sign::SignImageRequest req;
  auto from = image::ParseImageRef(*unsigned_image);
  auto to = image::ParseImageRef(config.container_image);
  if (!from.ok() || !to.ok()) {
    row.error = absl::StrCat(!from.ok() ? "sign.unsignedImage: " : "containerImage: ",
                             (!from.ok() ? from.status() : to.status()).message());
    return row;
  }
  if (from->ToString() == to->ToString()) {
    row.error = "sign.unsignedImage is the containerImage: the signed image would replace the one it is made from";
    return row;
  }
  req.unsigned_image = *from;
  req.signed_image = *to;
  auto from_options = OptionsFor(*from, s->unsigned_image_registry_tls, ca, docker_config);
  auto to_options = OptionsFor(*to, config.registry_tls, ca, docker_config);
  if (!from_options.ok() || !to_options.ok()) {
    row.error = std::string((!from_options.ok() ? from_options.status() : to_options.status()).message());
    return row;
  }
  req.unsigned_options = *from_options;
  req.signed_options = *to_options;
  for (const std::string& f : s->files_to_sign) {
    auto file = placement::Substitute(f, *vars);
    if (!file.ok()) {
      row.error = absl::StrCat("sign.filesToSign \"", f, "\": ", file.status().message());
      return row;
    }
    req.files_to_sign.push_back(*file);
  }
  req.all_modules = all_modules;
  req.modules_dir = absl::StrCat(config.modprobe.EffectiveDirName(), "/lib/modules/", config.kernel_version);
  req.key = creds.key;
  row.signer = creds.key->Signer();
  auto result = sign::SignImage(req);
  if (!result.ok()) {
    row.error = std::string(result.status().message());
    return row;
  }
  row.result = std::move(*result);
  return row;
}

int Print(const std::vector<Row>& rows, const std::string& kernel, const std::string& where,
          const std::string& format, std::ostream& out, std::ostream& err) {
  if (rows.empty()) {
    err << "error: no Module in " << where << " signs on kernel " << kernel
        << " (none has a mapping for it with sign, or a container sign)\n";
    return 1;
  }
  bool ok = true;
  for (const Row& r : rows) {
    ok = ok && r.error.empty();
  }
  if (format == "table") {
    std::vector<TableRow> table = {{"MODULE", "IMAGE", "DIGEST", "SIGNED", "RESULT"}};
    for (const Row& r : rows) {
      table.push_back({r.module, r.image, r.error.empty() ? r.result.manifest_digest.substr(0, 19) : "-",
                       r.error.empty() ? std::to_string(r.result.signed_files.size()) : "-",
                       r.error.empty() ? absl::StrCat("signed from ", r.unsigned_image) : r.error});
    }
    out << RenderTable(table);
    for (const Row& r : rows) {
      for (const std::string& f : r.result.signed_files) {
        out << r.module << ": signed " << f << "\n";
      }
    }
  } else {
    Value list = Value::EmptyList();
    for (const Row& r : rows) {
      Value v = Value::EmptyMap();
      v.Set("module", r.module);
      v.Set("unsignedImage", r.unsigned_image);
      v.Set("image", r.image);
      if (!r.signer.empty()) {
        v.Set("signer", r.signer);
      }
      if (r.error.empty()) {
        v.Set("digest", r.result.manifest_digest);
        Value files = Value::EmptyList();
        for (const std::string& f : r.result.signed_files) {
          files.Append(f);
        }
        v.Set("signedFiles", std::move(files));
        v.Set("baseLayersMounted", static_cast<int64_t>(r.result.base_layers_mounted));
        v.Set("bytesFetched", r.result.bytes_fetched);
        v.Set("bytesPushed", r.result.bytes_pushed);
      } else {
        v.Set("error", r.error);
      }
      list.Append(std::move(v));
    }
    Value doc = Value::EmptyMap();
    doc.Set("kernelVersion", kernel);
    doc.Set("modules", std::move(list));
    out << (format == "json" ? ToJson(doc) : ToYaml(doc));
  }
  return ok ? 0 : 1;
}

// --kubernetes: the cluster's Modules, each with the Secrets it names (KMM's layout: the key
// under data.key of keySecret, the certificate under data.cert of certSecret; pull and push
// credentials from imageRepoSecret). A Secret that cannot be read fails its Module only.
int SignInCluster(const std::string& kubeconfig, const std::string& kernel, const std::string& hash,
                  bool all_modules, const std::string& ca, const std::string& format, std::ostream& out,
                  std::ostream& err) {
  RealClock clock;
  absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> client = KubeClientFor(kubeconfig, clock);
  if (!client.ok()) {
    err << "error: " << client.status().message() << "\n";
    return 1;
  }
  absl::StatusOr<kube::ObjectList> list =
      (*client)->List(kube::ResourcePath("kmm.sigs.x-k8s.io/v1beta1", "modules"), {});
  if (!list.ok()) {
    err << "error: cannot list the cluster's Modules: " << list.status().message() << "\n";
    return 1;
  }
  std::map<std::string, std::unique_ptr<sign::SigningKey>> keys;  // by namespace/key/cert
  auto secret = [&](const std::string& ns, const std::string& name, const std::string& field,
                    size_t max) -> absl::StatusOr<std::string> {
    absl::StatusOr<Value> s = (*client)->Get(kube::ResourcePath("v1", "secrets", ns, name));
    if (!s.ok()) {
      return s.status();
    }
    return source::SecretValue(*s, field, max);
  };
  const CredentialsFor from_secrets = [&](const api::Module& m, const api::Sign& s) {
    SignCredentials c;
    const std::string& ns = m.metadata.namespace_;
    if (!s.key_secret || !s.cert_secret) {
      c.error = "sign needs keySecret and certSecret";
      return c;
    }
    const std::string id = absl::StrCat(ns, "/", s.key_secret->name, "/", s.cert_secret->name);
    if (keys.count(id) == 0) {
      constexpr size_t kMaxKeyBytes = size_t{1} << 20;
      absl::StatusOr<std::string> key = secret(ns, s.key_secret->name, "key", kMaxKeyBytes);
      absl::StatusOr<std::string> cert = secret(ns, s.cert_secret->name, "cert", kMaxKeyBytes);
      if (!key.ok() || !cert.ok()) {
        c.error = absl::StrCat(!key.ok() ? "sign.keySecret: " : "sign.certSecret: ",
                               (!key.ok() ? key.status() : cert.status()).message());
        return c;
      }
      absl::StatusOr<sign::SigningKey> loaded = sign::SigningKey::Load(*key, *cert, hash);
      if (!loaded.ok()) {
        c.error = absl::StrCat("keySecret ", ns, "/", s.key_secret->name, " and certSecret ", ns, "/",
                               s.cert_secret->name, ": ", loaded.status().message());
        return c;
      }
      keys[id] = std::make_unique<sign::SigningKey>(std::move(*loaded));
    }
    c.key = keys[id].get();
    if (m.spec.image_repo_secret && !m.spec.image_repo_secret->name.empty()) {
      absl::StatusOr<Value> pull =
          (*client)->Get(kube::ResourcePath("v1", "secrets", ns, m.spec.image_repo_secret->name));
      absl::StatusOr<std::string> docker = pull.ok() ? source::DockerConfigFromSecret(*pull)
                                                     : absl::StatusOr<std::string>(pull.status());
      if (!docker.ok()) {
        c.error = absl::StrCat("spec.imageRepoSecret: ", docker.status().message());
        return c;
      }
      c.docker_config = std::move(*docker);
    }
    return c;
  };
  std::vector<Row> rows;
  for (const Value& item : list->items) {
    absl::StatusOr<api::Module> m = source::ModuleFromObject(item);
    if (!m.ok()) {
      Row r;
      r.module = absl::StrCat(StringAt(item, {"metadata", "namespace"}), "/", StringAt(item, {"metadata", "name"}));
      r.error = absl::StrCat("the Module does not validate: ", m.status().message());
      rows.push_back(std::move(r));
      continue;
    }
    if (std::optional<Row> r = SignOne(*m, kernel, from_secrets, all_modules, ca)) {
      rows.push_back(std::move(*r));
    }
  }
  return Print(rows, kernel, "the cluster", format, out, err);
}

}  // namespace

int SignCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string kernel;
  std::vector<std::string> module_paths;
  std::string key_file;
  std::string cert_file;
  std::string hash = "sha256";
  bool all_modules = false;
  std::string ca;
  std::string docker_config_file;
  std::string format = "table";
  flags::FlagSet flags("kmodd-controller sign", kUsage);
  flags.String("--kernel", "RELEASE", "the kernel whose mappings are signed, as `uname -r` prints it", &kernel)
      .Required();
  flags.Strings("--modules", "PATH", "a Module manifest or a directory of them", &module_paths);
  flags.String("--key", "FILE", "the signing key (PEM or DER, unencrypted: what sign.keySecret holds)",
               &key_file);
  flags.String("--cert", "FILE", "its X.509 certificate (PEM or DER: what sign.certSecret holds)", &cert_file);
  bool kubernetes = false;
  std::string kubeconfig;
  flags.Switch("--kubernetes",
               "the cluster's Modules instead, each signed with its keySecret and certSecret and\n"
               "pushed with its imageRepoSecret",
               &kubernetes);
  flags.String("--kubeconfig", "FILE", "with --kubernetes: the client configuration (default: in-cluster)",
               &kubeconfig);
  flags.OneOf("--hash", "ALGORITHM", "the signature's hash, as CONFIG_MODULE_SIG_HASH (default sha256)", &hash,
              {"sha256", "sha384", "sha512", "sha224", "sha1"});
  flags.Switch("--all-modules",
               "sign every .ko under <dirName>/lib/modules/RELEASE/ instead of sign.filesToSign",
               &all_modules);
  flags.String("--ca", "FILE", "extra CAs (PEM) for the registries, beside the system's", &ca);
  flags.String("--docker-config", "FILE",
               "registry credentials (pull and push): a .dockerconfigjson or ~/.docker/config.json",
               &docker_config_file);
  flags.OneOf("-o,--output", "FORMAT", "table (default), yaml or json", &format, {"table", "yaml", "json"});
  if (std::optional<int> exit = flags.ParseOrExit(args, out, err)) {
    return *exit;
  }
  if (module_paths.empty() == !kubernetes) {
    return flags.UsageError(err, "give --modules (Module manifests or directories) or --kubernetes, one of them");
  }
  if (kubernetes) {
    if (!key_file.empty() || !cert_file.empty() || !docker_config_file.empty()) {
      return flags.UsageError(err, "--key, --cert and --docker-config go with --modules: with --kubernetes "
                                   "each Module's keySecret, certSecret and imageRepoSecret give them");
    }
    return SignInCluster(kubeconfig, kernel, hash, all_modules, ca, format, out, err);
  }
  if (key_file.empty() || cert_file.empty()) {
    return flags.UsageError(err, "--modules needs --key and --cert (the signing key and its certificate)");
  }
  const absl::StatusOr<std::string> key_text = ReadFile(key_file);
  const absl::StatusOr<std::string> cert_text = ReadFile(cert_file);
  if (!key_text.ok() || !cert_text.ok()) {
    err << "error: " << (!key_text.ok() ? "--key: " : "--cert: ")
        << (!key_text.ok() ? key_text.status() : cert_text.status()).message() << "\n";
    return 1;
  }
  absl::StatusOr<sign::SigningKey> key = sign::SigningKey::Load(*key_text, *cert_text, hash);
  if (!key.ok()) {
    err << "error: --key " << key_file << " and --cert " << cert_file << ": " << key.status().message() << "\n";
    return 1;
  }
  std::string docker_config;
  if (!docker_config_file.empty()) {
    absl::StatusOr<std::string> text = ReadFile(docker_config_file);
    if (!text.ok()) {
      err << "error: --docker-config: " << text.status().message() << "\n";
      return 1;
    }
    docker_config = std::move(*text);
  }
  api::Decoded mods = DecodePaths(module_paths);
  mods.nodes.clear();
  ValidateDecoded(mods);
  PrintDiagnostics(mods, err);
  if (!mods.errors.empty()) {
    err << "error: nothing signed: fix the errors above\n";
    return 1;
  }
  const CredentialsFor from_files = [&](const api::Module&, const api::Sign&) {
    return SignCredentials{&*key, docker_config, ""};
  };
  std::vector<Row> rows;
  for (const auto& m : mods.modules) {
    if (std::optional<Row> r = SignOne(m.object, kernel, from_files, all_modules, ca)) {
      rows.push_back(std::move(*r));
    }
  }
  return Print(rows, kernel, absl::StrCat("--modules ", JoinPaths(module_paths)), format, out, err);
}

}  // namespace kmodd::cli
