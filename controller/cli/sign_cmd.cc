// kmodd-controller sign: KMM's sign for one kernel, run here instead of in a Job. For each
// Module whose mapping for the kernel has `sign` (or whose container has), the unsignedImage
// is read, its filesToSign signed with the key, and the result pushed as the mapping's
// containerImage. See controller/sign/image_signer.h.

#include <optional>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/oci/pull_secret.h"
#include "common/table.h"
#include "common/value.h"
#include "controller/cli/commands.h"
#include "controller/cli/inputs.h"
#include "controller/placement/kernel_version.h"
#include "controller/placement/mapping.h"
#include "controller/sign/image_signer.h"

namespace kmodd::cli {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-controller sign --kernel RELEASE --modules PATH [--modules PATH...]\n"
    "                             --key FILE --cert FILE [--hash ALGORITHM] [--all-modules]\n"
    "                             [--ca FILE] [--docker-config FILE] [-o table|yaml|json]\n";

struct Row {
  std::string module;
  std::string unsigned_image;
  std::string image;
  std::string error;  // "" when signed
  sign::SignImageResult result;
};

// The sign a kernel mapping gets, as KMM merges the two levels: the mapping's unsignedImage,
// keySecret and certSecret override the container's when set, filesToSign is appended, and
// unsignedImageRegistryTLS comes from the container level only. nullopt when neither signs.
std::optional<api::Sign> EffectiveSign(const api::ModuleLoaderContainerSpec& c, const api::KernelMapping* km) {
  const std::optional<api::Sign> none;
  const std::optional<api::Sign>& mapping = km != nullptr ? km->sign : none;
  if (!c.sign) {
    return mapping;
  }
  if (!mapping) {
    return c.sign;
  }
  api::Sign s = *c.sign;
  if (!mapping->unsigned_image.empty()) {
    s.unsigned_image = mapping->unsigned_image;
  }
  if (mapping->key_secret) {
    s.key_secret = mapping->key_secret;
  }
  if (mapping->cert_secret) {
    s.cert_secret = mapping->cert_secret;
  }
  s.files_to_sign.insert(s.files_to_sign.end(), mapping->files_to_sign.begin(), mapping->files_to_sign.end());
  return s;
}

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

// Signs one Module's image for `kernel`; nullopt when the Module does not sign on it.
std::optional<Row> SignOne(const api::Module& m, const std::string& kernel, const sign::SigningKey& key,
                           bool all_modules, const std::string& ca, const std::string& docker_config) {
  Row row;
  row.module = absl::StrCat(m.metadata.namespace_, "/", m.metadata.name);
  placement::CompiledModule cm(m);
  const api::ModuleLoaderContainerSpec* loader = cm.loader();
  if (loader == nullptr) {
    return std::nullopt;
  }
  auto resolved = cm.Resolve(kernel);
  if (!resolved.ok()) {
    row.error = std::string(resolved.status().message());
    return row;
  }
  if (!resolved->has_value()) {
    return std::nullopt;  // no mapping for the kernel: nothing to sign
  }
  const placement::ResolvedConfig& config = **resolved;
  auto index = cm.FindMapping(config.kernel_version);
  const api::KernelMapping* km = index.ok() && index->has_value() ? &loader->kernel_mappings[**index] : nullptr;
  const std::optional<api::Sign> sign = EffectiveSign(*loader, km);
  if (!sign) {
    return std::nullopt;
  }
  const api::Sign* s = &*sign;
  row.image = config.container_image;
  auto vars = placement::TemplateVars(config.kernel_version, m.metadata.name, m.metadata.namespace_);
  if (!vars.ok()) {
    row.error = std::string(vars.status().message());
    return row;
  }
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
  req.key = &key;
  auto result = sign::SignImage(req);
  if (!result.ok()) {
    row.error = std::string(result.status().message());
    return row;
  }
  row.result = std::move(*result);
  return row;
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
               &key_file)
      .Required();
  flags.String("--cert", "FILE", "its X.509 certificate (PEM or DER: what sign.certSecret holds)", &cert_file)
      .Required();
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
  if (module_paths.empty()) {
    return flags.UsageError(err, "--modules is required (a Module manifest or a directory of them)");
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
  std::vector<Row> rows;
  for (const auto& m : mods.modules) {
    if (std::optional<Row> r = SignOne(m.object, kernel, *key, all_modules, ca, docker_config)) {
      rows.push_back(std::move(*r));
    }
  }
  if (rows.empty()) {
    err << "error: no Module in --modules " << JoinPaths(module_paths) << " signs on kernel " << kernel
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
    doc.Set("signer", key->Signer());
    doc.Set("modules", std::move(list));
    out << (format == "json" ? ToJson(doc) : ToYaml(doc));
  }
  return ok ? 0 : 1;
}

}  // namespace kmodd::cli
