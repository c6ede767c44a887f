#pragma once

// Kernel module signing (issue 16, item 2), in the format the kernel verifies
// (kernel/module/signing.c reads it back to front):
//
//   module bytes | CMS SignedData, DER, detached | struct module_signature | magic
//
// where struct module_signature is 12 bytes: algo, hash, id_type (2: PKCS#7), signer_len,
// key_id_len (all 0 but id_type), 3 bytes of padding, and the CMS length as a big-endian
// 32-bit number; and the magic is "~Module signature appended~\n". The CMS carries no
// certificates and no signed attributes, and names the signer by issuer and serial
// number, so that it is deterministic for an RSA key: the same bytes as the kernel's own
// scripts/sign-file for the same key, certificate and module.
//
// Keys and certificates come as PEM or DER text (a Secret's value, or a file's). Nothing is
// written to disk. No OpenSSL type leaves module_signer.cc.

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kmodd::sign {

inline constexpr std::string_view kModuleSignatureMagic = "~Module signature appended~\n";

class SigningKey {
 public:
  // The private key and its certificate; refused when they do not belong together, or when
  // either cannot be read (the message says which). `hash`: sha256 (default), sha384,
  // sha512, sha224 or sha1, as CONFIG_MODULE_SIG_HASH.
  [[nodiscard]] static absl::StatusOr<SigningKey> Load(std::string_view key, std::string_view cert,
                                                       std::string_view hash = "sha256");
  ~SigningKey();
  SigningKey(SigningKey&&) noexcept;
  SigningKey& operator=(SigningKey&&) noexcept;

  // The certificate's subject, as `modinfo` shows the signer (its CN, or the whole name).
  std::string Signer() const;

  struct State;

 private:
  explicit SigningKey(std::unique_ptr<State> s);
  friend absl::StatusOr<std::string> SignModule(std::string_view module, const SigningKey& key);
  std::unique_ptr<State> state_;
};

// Whether `module` ends with a module signature (the magic).
bool IsSigned(std::string_view module);

// `module` without its appended signature, if it has one; as is otherwise. Refused when the
// trailer is there but inconsistent (a length past the start).
[[nodiscard]] absl::StatusOr<std::string_view> StripSignature(std::string_view module);

// `module` signed with `key`: an existing signature is replaced, not stacked.
[[nodiscard]] absl::StatusOr<std::string> SignModule(std::string_view module, const SigningKey& key);

}  // namespace kmodd::sign
