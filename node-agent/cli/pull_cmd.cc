// kmodd-agent pull: pull and extract one driver image into the cache, for debugging and
// for pre-seeding nodes.

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/file.h"
#include "common/flags.h"
#include "common/value.h"
#include "node-agent/cli/commands.h"
#include "node-agent/cli/image_flags.h"
#include "common/oci/pull_secret.h"

namespace kmodd::agent {

namespace {

constexpr char kUsage[] =
    "usage: kmodd-agent pull REF [--cache DIR] [--pull-secret FILE] [--ca FILE] [--insecure]\n"
    "                        [--insecure-skip-tls-verify] [--kernel VERSION] [--dir-name DIR]\n"
    "                        [--firmware-path DIR] [--pull-policy POLICY] [--progress]\n"
    "                        [-o yaml|json]\n"
    "  REF is registry/repo:tag[@sha256:...] or oci-layout:PATH[:TAG]. Extracts\n"
    "  <dir-name>/lib/modules/<kernel>/ (and the firmware path) into the cache and prints\n"
    "  the tree's path and the manifest digest.\n";

}  // namespace

int PullCommand(const std::vector<std::string>& args) {
  image::PullRequest req;
  std::string cache = "/var/lib/kmodd/images";
  std::string secret_file;
  std::string kernel;
  std::string dir_name = "/opt";
  std::string firmware_path;
  std::string format = "yaml";
  bool progress = false;
  flags::FlagSet flags("kmodd-agent pull", kUsage);
  flags.Positional("REF", "registry/repo:tag[@sha256:...] or oci-layout:PATH[:TAG]", &req.image)
      .Needs("an image reference (REF)");
  flags.String("--cache", "DIR", "the image cache (default /var/lib/kmodd/images)", &cache);
  flags.String("--pull-secret", "FILE", ".dockerconfigjson with the registry's credentials",
               &secret_file);
  flags.String("--ca", "FILE", "extra CAs for the registry", &req.registry.ca_file);
  flags.Switch("--insecure", "plain HTTP to the registry", &req.registry.plain_http);
  flags.Switch("--insecure-skip-tls-verify", "HTTPS without checking the registry's certificate",
               &req.registry.skip_tls_verify);
  flags.String("--kernel", "VERSION", "the kernel to extract for (default: this one's)", &kernel);
  flags.String("--dir-name", "DIR", "where the image keeps lib/modules (default /opt)",
               &dir_name);
  flags.String("--firmware-path", "DIR", "the image's firmware directory, extracted too",
               &firmware_path);
  flags.String("--pull-policy", "POLICY", "IfNotPresent, Always or Never, as in a Module",
               &req.pull_policy);
  flags.Switch("--progress",
               "a JSON line with bytes done and total to stderr every 250 ms\n"
               "while blobs download",
               &progress);
  flags.OneOf("-o,--output", "FORMAT", "yaml (default) or json", &format, {"yaml", "json"});
  if (std::optional<int> exit = flags.ParseOrExit(args, std::cout, std::cerr)) {
    return *exit;
  }
  if (kernel.empty()) {
    auto release = ReadFile("/proc/sys/kernel/osrelease");
    kernel = release.ok() ? release->substr(0, release->find('\n')) : "";
  }
  auto strip = [](std::string p) {
    while (!p.empty() && p.front() == '/') {
      p.erase(0, 1);
    }
    return p.empty() || p.back() == '/' ? p : p + "/";
  };
  req.keep_prefixes = {absl::StrCat(strip(dir_name), "lib/modules/", kernel, "/")};
  if (!firmware_path.empty()) {
    req.keep_prefixes.push_back(strip(firmware_path));
  }
  if (!secret_file.empty() && req.image.rfind("oci-layout:", 0) != 0) {
    auto secret = ReadFile(secret_file);
    auto ref = image::ParseImageRef(req.image);
    if (!secret.ok() || !ref.ok()) {
      std::cerr << "error: " << (secret.ok() ? ref.status() : secret.status()).message() << "\n";
      return 1;
    }
    auto creds = image::CredentialsFor(*secret, ref->registry);
    if (!creds.ok()) {
      std::cerr << "error: " << secret_file << ": " << creds.status().message() << "\n";
      return 1;
    }
    req.registry.credentials = *creds;
  }
  image::ImageCache images(cache, BeastFactory());
  // The pull runs here; with --progress a second thread samples the cache's counters, the
  // same ones the agent's event stream reports.
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::thread reporter;
  if (progress) {
    reporter = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_for(lock, std::chrono::milliseconds(250), [&] { return finished; })) {
        for (const auto& [image, bytes] : images.InFlight()) {
          Value line = Value::EmptyMap();
          line.Set("image", image);
          line.Set("bytesDone", bytes.first);
          line.Set("bytesTotal", bytes.second);
          std::cerr << ToJsonLine(line) << "\n";
        }
      }
    });
  }
  auto pulled = images.Pull(req);
  if (reporter.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_all();
    reporter.join();
  }
  if (!pulled.ok()) {
    std::cerr << "error: " << pulled.status().message() << "\n";
    return 1;
  }
  Value out = Value::EmptyMap();
  out.Set("image", req.image);
  out.Set("digest", pulled->manifest_digest);
  out.Set("tree", pulled->root);
  out.Set("manifestFetched", pulled->resolved_remotely);
  out.Set("blobBytes", pulled->blob_bytes);
  std::cout << (format == "json" ? ToJson(out) : ToYaml(out));
  return 0;
}

}  // namespace kmodd::agent
