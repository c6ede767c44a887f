// Signing throughput: kmodd's SignModule over a set of module files, as `kmodd-controller
// sign` would do them (read, sign, write the signed file), for comparison with the kernel's
// scripts/sign-file run once per file (tools/bench/sign_vs_sign_file runs both).
//
//   sign_bench KEY CERT OUT_DIR FILE...
//
// Prints one line: files, bytes in, seconds, MB/s (10^6 bytes of module signed per second).

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "controller/sign/module_signer.h"

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: sign_bench KEY CERT OUT_DIR FILE...\n");
    return 2;
  }
  auto key = kmodd::sign::SigningKey::Load(Read(argv[1]), Read(argv[2]));
  if (!key.ok()) {
    std::fprintf(stderr, "sign_bench: %s\n", std::string(key.status().message()).c_str());
    return 1;
  }
  const std::string out_dir = argv[3];
  int64_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 4; i < argc; ++i) {
    const std::string in = argv[i];
    const std::string data = Read(in);
    auto signed_module = kmodd::sign::SignModule(data, *key);
    if (!signed_module.ok()) {
      std::fprintf(stderr, "sign_bench: %s: %s\n", in.c_str(), std::string(signed_module.status().message()).c_str());
      return 1;
    }
    const std::string out = out_dir + "/" + std::to_string(i) + ".ko";
    std::ofstream(out, std::ios::binary) << *signed_module;
    bytes += static_cast<int64_t>(data.size());
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("files %d bytes %lld seconds %.3f MB/s %.1f\n", argc - 4, static_cast<long long>(bytes), s,
              static_cast<double>(bytes) / s / 1e6);
  return 0;
}
