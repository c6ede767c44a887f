#include "controller/cli/inputs.h"

#include "controller/kube/config.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "api/validate.h"

namespace kmodd::cli {

namespace fs = std::filesystem;

namespace {

bool IsManifest(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

void DecodeFile(const std::string& path, api::Decoded& d) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    // The status message names the path already: the diagnostic's source would repeat it.
    d.errors.push_back(api::Diagnostic{"", 0, "", "", std::string(text.status().message())});
    return;
  }
  api::DecodeInto(*text, path, d);
}

}  // namespace

api::Decoded DecodePaths(const std::vector<std::string>& paths) {
  api::Decoded d;
  for (const auto& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<std::string> files;
      for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (entry.is_regular_file(ec) && IsManifest(entry.path())) {
          files.push_back(entry.path().string());
        }
      }
      if (ec) {
        d.errors.push_back(api::Diagnostic{path, 0, "", "",
                                           absl::StrCat("cannot list directory: ", ec.message())});
        continue;
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        DecodeFile(f, d);
      }
    } else {
      DecodeFile(path, d);
    }
  }
  return d;
}

std::string JoinPaths(const std::vector<std::string>& paths) {
  std::string out;
  for (const auto& p : paths) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", p);
  }
  return out;
}

void ValidateDecoded(api::Decoded& d) {
  std::vector<api::Located<api::Module>> valid;
  std::map<std::string, std::string> seen;  // key -> "file:line" of the first definition
  for (auto& lm : d.modules) {
    const std::string object = absl::StrCat("Module ", lm.object.Key());
    auto errors = api::ValidateModule(lm.object);
    for (auto& e : errors) {
      d.errors.push_back(api::Diagnostic{lm.source, lm.LineOf(e.path), object, e.path, e.message});
    }
    for (auto& w : api::KubernetesOnlyFields(lm.object)) {
      d.warnings.push_back(
          api::Diagnostic{lm.source, lm.LineOf(w.path), object, w.path, w.message});
    }
    if (auto [it, fresh] = seen.emplace(lm.object.Key(), absl::StrCat(lm.source, ":", lm.line));
        !fresh) {
      d.errors.push_back(api::Diagnostic{
          lm.source, lm.line, object, "metadata.name",
          absl::StrCat("defined twice (first at ", it->second,
                       "); give each Module a unique namespace/name")});
      continue;
    }
    if (errors.empty()) {
      valid.push_back(std::move(lm));
    }
  }
  d.modules = std::move(valid);
}

void PrintDiagnostics(const api::Decoded& d, std::ostream& err) {
  for (const auto& w : d.warnings) {
    err << "warning: " << w.ToString() << "\n";
  }
  for (const auto& e : d.errors) {
    err << "error: " << e.ToString() << "\n";
  }
}

absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> KubeClientFor(const std::string& kubeconfig,
                                                                   const Clock& clock) {
  absl::StatusOr<kube::KubeConfig> config =
      kubeconfig.empty() ? kube::InClusterConfig() : kube::LoadKubeconfig(kubeconfig);
  if (!config.ok()) {
    return config.status();
  }
  return kube::RestKubeClient::Create(*config, clock);
}

}  // namespace kmodd::cli
