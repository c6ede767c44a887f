// Module signing (controller/sign/module_signer.h) against a known vector: a fixed test key
// and certificate (made for this test only, never trusted anywhere) and a fixed module. The
// expected bytes are what the kernel's own scripts/sign-file (linux-kbuild-6.1) wrote for
// them: RSA signatures without signed attributes are deterministic, so the output must be
// the same, byte for byte. Then the hostile inputs: keys and certificates that do not
// belong together or do not parse, trailers that lie.

#include <catch2/catch.hpp>

#include <openssl/sha.h>

#include <cstdio>
#include <string>

#include "controller/sign/module_signer.h"

using kmodd::sign::SigningKey;
using kmodd::sign::SignModule;

namespace {

const char kKey[] = R"(-----BEGIN PRIVATE KEY-----
MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCyWhmNdCxtiWQw
JWB9ZV9Jq/qEBUo9HABNr2IIpKPN2Tpc6BQy4yNQWwGlPiijkSwpv6DN2FwLavFQ
qt7wlvHZlbcDjJsonuytmkLB7qv1smmsNiJWSljrS4+pmGphdi03rWZwQzf3AdyY
TatgfYnS+Xn+/iND2g9VJ7jJfscNnj7HjsH5sJ543P4jWuNWLNhJPJNq9+J9B7J8
AYcM3DrxJOIy7UN7NA00XdsojkoKJHBwbL98E586IrEVspODb/+gXMp98GAF0Fvm
5qEn/VVpxUUq8YNoMwvfVs5ZCAFwBNUDRKwwmHhGN9AhJ3aprtSJe7Jb5sRRgFHS
AyOI7FGjAgMBAAECggEAAwMusMBYTjSqJwx5riLBJG/Nsu1FDue8AVsEKtOJ9zHY
mXWvKTX8mcQiaZd8kljqNlL5qklMa16BqX76PSAuq7A42ITj2ctLLG+03YJBAhP/
NmBf6/zdYRDtKRqPG6dQ9BfZ2yYfgSWcZy+2byefrGIxIZjYvU5fwHrZHFaZdY0e
pkGjeaFme18Kw5LkcyT9QS9hkszxunN9nbLHHz4IuYoaZThu+lSq6iBC6NuM1SEZ
JSXheqsm4ZgijppQOCVX+zfjFgWUKdSoAEBBwv+q6mGkKZxHIkoz556IZrOA0+pB
XYs2ucJuD7RkAGrvhnj2KWTLsh5mXgZ8Arv6Bhvv7QKBgQDXw5aj8Y94ctkALHgZ
H2GXrXpHTH6jbZUjJQU49j144y/5g7qfc86ygtaxLKFt41SJYLdja+Jhi+D2PPcZ
GCKNnzXEDKP+FBpDchq4SB72eCz6hIFBnZ0m4fIFrijrVZ7h829aEQRE/tHzxxSp
hDxWKS+AvkkaKJJgHMVz6AGKlwKBgQDTnHzS8vIplXkL1t7g68zlAxDEAH6mE1db
jnM0gMLroIetCFOgpye0D85Ihbs1i9p27gO3izI7SQ+MZZdaCc8N1q5cnFcX/Dy0
0HkPyK5ghosmjYOTVgAXUZotGVYky21MSZsotP4zYFJVz70d/tQibfPHEpolw4pM
VwCi0yZO1QKBgQCgiVx6Gu9+1ST0ZiHtv1Wjv2WtyxKmkpBWl+Ls4PoYCiHV6tde
cJIobAVFyklKM8zgcl/Az7Kela8KR44q07RR31Xnyufx0g9Ag5Ox7adsBzqgIxrx
MU6Ocarb4xt7DjerMq91OhgNJfQdB9Et17/086vuhKZrmihe7slTVhpffQKBgFpI
ZLU3s/vr6uYTOaoq0JNQuIF3WJGQpO/KGfrniMIxDlHTwKJFTtoy+CbW76WL0px1
Nh7EA51psXmMCoP+tVlJI8Edbscr9daLL2t9inBiVtIPBHkC8yz/wtDFA4zVQf+P
U+SNO/s9eENmS2CVzXoXATAJDr1X7RRe9kWB4tE1AoGAXZZzx+lh/eHruq2suo5F
UPR+bX/OuIhkKAqCUbp3LnO44emELSnV4A6IrMZd32DaFNf7iDokfvxhvGU+Xedd
3RL23IleK+VshCzzROEzBYU69ykp/wojS20rt4Y508pLepR65PAl/mqrRcP4TUPd
2pqiuEGcNjIRkIMff7vhIIQ=
-----END PRIVATE KEY-----
)";
const char kOtherKey[] = R"(-----BEGIN PRIVATE KEY-----
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDuJJaLWv1s4Ekc
fr3PimNz1p1nN/fuh+1ZjZ2af1OOGkLi73SZw2u4vaGtxTcK/miPn3s6BO3qglVz
uRMbIVP8jdgqGWBLNh/W25AArQ4Zr7uWh0e2cZaqNGsLBLgI64AmIB2JvbLD+C0T
VrMKkDIWnB/2Oi1dC1oxyZaTO+tGaHA+mRu/8YvGav78hmHccPRmzBb604bzNpTt
c26H1Otytw3EdU7MR7RfpmJBWlNrp3FeZH3vAzsjEseoIADgF9oq/Ff+06tbGV35
IAoXQ2byXJxWHdq79eX0LwYWBDJoKLOK+OTBDN1aqjCtgeqpQbJRkm65LM3u0yzO
AFulP2r/AgMBAAECggEAALnY0+ztTGu9weMfmEsD6+JorNvzCJx55YpZVdxzXPib
YXMCI6GS8v5L2s744umfM9YGjcjwfZcqjWD5RSawNzaGDj7Mjv4jLNpuWnNRLOa6
UHQ7Q2B5spr9TWfL64p4Py6mT0JmSJyCthhzx7PSHY31SY6Ds+NEeMOrM1ePWR+F
ly8nOprQ/WTrp4CCuyuFzTixnlPqNb/RLa4x8hlTCp10gakJSfkWl48pFLXniITz
WLI8OwiEHZxKPwq+NwbY6w0x4zmKvJ7m5Mwdlb1ixW886ngJzJ5mo4+WbQmuIhN4
hGcj0v+vj7LRNcviGzuera4LyMQy085OFIy6b3ywqQKBgQD79HP7aIVVvZ+lrqlB
YPZkW8nqWi+se7IheG88knj4IwpT6RLGx3ZMOdHpRcPSfPnkfs4i/1dtbSlZf+zD
Y4MfRKpAnuFEoM3JSRo43XPTPmOufbb/XequEoFT3yx0QSxyPLRYTt4zD6DVlXiM
uoHZDBG+yjkYvMTqzKokOcXeKQKBgQDx91378w0tQKYgeU+C0zPB4wRknTX5GdnY
sE38reWcEooQkWBmUzsJaWtP3pe/RKRi8vpN9iDETeAYVlfjQwW+mUsfKn58fFZF
Wm7zAF6edXKrClevmXZukmaYysv9zRCLyYktWuv08a3az5xkSD9GoL3ffjaVy9V5
YcbQLSrU5wKBgEBHjY+Giv3k8uYCOYxEgJf6EvmHKMKIjFmdsENz2wjzZ58gx3mP
Sc8IsVUiR2NcHyT8dPrYyiVQxEvhJzZyHPHNQuJZpn8rx1SjId2AIhyyvhu2Vwmv
nD/s2LHdLio6tmwusJQXCvlb81yKVccRji8htSVH0mlNP6/np0C2vJSBAoGBANoh
X4fHp+RYuKrj0cslrS4oAwjVNRf4twwCfHvDJRBbIj4nYJk+hSVJ9OUOzQwvzGYr
l3z62rU9Yz1tcVO+UwptVWymOVruGDPzf7vvZF1DkfkhnMT/+uVZc8ZgZB/MYxMx
v0m1AqxRx6JPsTQycWCxfhphxMGr/Sms/LclUMyXAoGBAMWmbCTiztpHOsZEDyOj
usB6eFUOYV/eUJKA2fTCHrw8QUU1eWgM7p6/DgM2fVyCsYQlKnrLoq2M8MJTQ9jt
umLHIbY41t/13zeZnbeBatCN7jWyLZ7ZlVjxupuUlB9g+ov/JMa9M9h9HF3HjdRl
K+PWHGBRS/j4QKsgd/uEZ+l2
-----END PRIVATE KEY-----
)";
// kKey encrypted with the passphrase "secret" (openssl pkey -aes256).
const char kEncryptedKey[] = R"(-----BEGIN ENCRYPTED PRIVATE KEY-----
MIIFLTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQIbjEahex1STECAggA
MAwGCCqGSIb3DQIJBQAwHQYJYIZIAWUDBAEqBBAXq9ajlbL5Nd98sjXqEjN0BIIE
0I1FmtgvKzqmMYEDpQ2YFrzSm7gOwqfnRXahH3rvBcg0M0B7Ea702PzIAtaB+dtj
rGk1mTC08u167H54A2Qh9z6hF35C4vAXJSoD1wt9l6R6PDcqobAS490CDtx9oT1u
JdeYr6vY4e1Spcr9LGvFVWRmQ3beaILtpEe/fp5Wkjsi+4/GJZgB/XMvG4Z1HCAQ
D05H0YZKrq5Vad1qRPg4K39Qkp3+fXULxa9KeJqtS4UgTtMmGuxpFbYF4xK/RnKP
lyWNreBhD4W8CQ4R2BAa4/UGh/TZiw8FDHfmOs+L9n6lZuURjaqlg+J0UgL9EuKn
jnYqEwGOXeoDnWrlpzplCcdB8pyYjudQQfykekjkLjimu92edNlt6cX7R1ouRnDK
rycab5RRy3lFf8kMvQnv+miRwpAmB06l5whClI/sYSlzlQgqdP1fP7fQjbBEVWo8
rtL8cBJZNzvWshX6Jm/+LtG/92La0co66XKs8jQj4EWmjNyUx1XLhMDWpw9QY+JY
FcPnq520qEtgnVdCbuiIcFf35gYpwfkFQSDPdAeiOFJ48S6AZ8gtNDzSeXQ5ZYwC
51f9D9Oi87wH2Nz6MBpnv/G56xp/Q4hROLJ25HKhPLB4HrCXzVyz7hGXyJljjw02
e9WNVQfzwO+t4A7EJ5M1sjI9Z0398x1dkQO6xO48uV4tRi9mlR5ddWn2HLwUJHxG
P4qCqv01Eg1YK7lWqxz92eGwIz4ULA/pIXZvhyBffkOjtl0XGWaL7zFWGFQYR+cE
dHv4kibiHdC7fNv175WhXeUhr5wRRz8lcCoLmm5ZY+yojDsZoXhL4VD3t38UdJkx
f6XK5BYJhaZGbTJBWNCFSjA2keuXbuI4anxduz5iHDb5KDoLl6mGfV32R5b07zfC
p+BDvXpfqbMRYsC0ZKeTGJmk9aryoiKCmOqFEZsqKOwiMhvdRt8LapF/RiDFdsZt
wj9ttgP0FwHhrB4bSaU1pvnbY3ar/6TKumhEB4ku7++SRzHvWwMnws15lq5bQOQW
L96kECXOtlds+va9J/ElQx1+huX6lWlxUfQFqkVVC17gLNIV0SjB+acZpkPOxTOP
z+/LOzKtP2z8GgZXPSxSnsDpGyekpsiG6XMFmApzkTahw9U0pSeN4+79y0EvaQy4
VExz5tL19dMYRsHbqbv3ft3PEYCpKHWKLJuVnWFtc2SV//fkB7qkw15ZWgAv5L7q
rQOUTRfGpWG442RMmKWdLHKUe4c34MNEgh3uOEbqZPLZvtqKejtkzoL03dfIQqQc
rgXnzkXa8wgEO+dmfVpD9MTehE0hVzdqpPYofIbiDoWr7y7iVgpUhOs0rJytkUnk
cwPg5hYdyfyhStSJhLLktgVjRu9AUKbSbZtl1c/Xu2t5BYvp9dVnVT4fWubLqYQ5
zihMRcZ6DXcr/zSIdaxLvgKa0wESOpOFSQhzTWQ9y44ReF04zIsVhNRFASPhEiPo
T6HdGwxJ9HXJQF4qw6w5Ws/JfomRtXPFuIKiYQO8Kns7ofKYj7vVUrOyx3ExL6mi
ETV/b4RJcio2IZ05Hr7dvVUhS9iO1N9wdi/+fEOomKpScXxukMqmUd6sYGHna61E
qgRbK4KC25WDLb9Y1MpHsVX1J/2ZCv1mYSDBrt34YVzJ
-----END ENCRYPTED PRIVATE KEY-----
)";
const char kCert[] = R"(-----BEGIN CERTIFICATE-----
MIIDWjCCAkKgAwIBAgIUOeNZeDAjv59dB1sF/pH/KpObLV0wDQYJKoZIhvcNAQEL
BQAwMTEfMB0GA1UEAwwWa21vZGQgdGVzdCBzaWduaW5nIGtleTEOMAwGA1UECgwF
a21vZGQwIBcNMjYxMjAzMjIzNDM2WhgPMjEyNjExMDkyMjM0MzZaMDExHzAdBgNV
BAMMFmttb2RkIHRlc3Qgc2lnbmluZyBrZXkxDjAMBgNVBAoMBWttb2RkMIIBIjAN
BgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAsloZjXQsbYlkMCVgfWVfSav6hAVK
PRwATa9iCKSjzdk6XOgUMuMjUFsBpT4oo5EsKb+gzdhcC2rxUKre8Jbx2ZW3A4yb
KJ7srZpCwe6r9bJprDYiVkpY60uPqZhqYXYtN61mcEM39wHcmE2rYH2J0vl5/v4j
Q9oPVSe4yX7HDZ4+x47B+bCeeNz+I1rjVizYSTyTavfifQeyfAGHDNw68STiMu1D
ezQNNF3bKI5KCiRwcGy/fBOfOiKxFbKTg2//oFzKffBgBdBb5uahJ/1VacVFKvGD
aDML31bOWQgBcATVA0SsMJh4RjfQISd2qa7UiXuyW+bEUYBR0gMjiOxRowIDAQAB
o2gwZjAdBgNVHQ4EFgQUd4qWFdOvRXC0FwNk8qAtk4jWhYQwHwYDVR0jBBgwFoAU
d4qWFdOvRXC0FwNk8qAtk4jWhYQwDwYDVR0TAQH/BAUwAwEB/zATBgNVHSUEDDAK
BggrBgEFBQcDAzANBgkqhkiG9w0BAQsFAAOCAQEAFSpgDZ24Ll7te8BMWTC337BF
+An09HiPHpHmeU3d1FQ0at/a4KIPdoZbzX00geepgrQSRZvAfHPKo+BQ4c9pVJ56
aOF3LXfGA45cpNPjlYdsDxvVG61ciVGVmzYlhjoG4chJwhfcylS4s6eMfnJshuvf
ru+WX2/ncHvvdpJllzxQIo5rJRF7VTTDgThRcBzF4HTQ7KkId6EO0L/lGRZGlr8X
LuHxXXzupd3BeZ0uc9fhTPxY2e5ECb7adgsMioq3HqKBpwI7K4R3eIswhaeUsain
sk54J63SVK2/9jMmyRnKPqyKakDAAl/GjAqulWXFReK7M9lrUd/b7FvsAsx/3A==
-----END CERTIFICATE-----
)";

// The module: 10,000 bytes, byte i = (7i + 3) mod 251.
std::string Module() {
  std::string m(10000, '\0');
  for (size_t i = 0; i < m.size(); ++i) {
    m[i] = static_cast<char>((i * 7 + 3) % 251);
  }
  return m;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d);
  std::string out;
  char buf[3];
  for (unsigned char c : d) {
    std::snprintf(buf, sizeof(buf), "%02x", c);
    out += buf;
  }
  return out;
}

}  // namespace

TEST_CASE("module signing: byte for byte what the kernel's sign-file writes") {
  auto key = SigningKey::Load(kKey, kCert);
  REQUIRE(key.ok());
  CHECK(key->Signer() == "kmodd test signing key");
  const std::string module = Module();
  auto signed_module = SignModule(module, *key);
  REQUIRE(signed_module.ok());
  CHECK(signed_module->size() == 10468);
  CHECK(Sha256Hex(*signed_module) ==
        "253c26312706961a7eb0785ee901db59763b34ea7ae1676efb29771318b025aa");
  CHECK(kmodd::sign::IsSigned(*signed_module));
  CHECK_FALSE(kmodd::sign::IsSigned(module));
  // Signing again replaces the signature: the same bytes, not a second one appended.
  auto again = SignModule(*signed_module, *key);
  REQUIRE(again.ok());
  CHECK(*again == *signed_module);
  auto stripped = kmodd::sign::StripSignature(*signed_module);
  REQUIRE(stripped.ok());
  CHECK(*stripped == module);
}

TEST_CASE("module signing: bad keys, certificates and trailers are refused - saying which") {
  struct Case {
    const char* what;
    std::string key;
    std::string cert;
    std::string hash;
    const char* message;
  };
  const Case cases[] = {
      {"the key is not a key", "not a key", kCert, "sha256", "signing key is not"},
      {"the certificate is not one", kKey, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
       "sha256", "signing certificate is not"},
      {"the certificate given as the key", kCert, kCert, "sha256", "signing key is not"},
      {"a hash the kernel does not verify", kKey, kCert, "md5", "not one the kernel verifies"},
      {"empty", "", "", "sha256", "signing key is not"},
      {"a key that is not the certificate's", kOtherKey, kCert, "sha256", "does not match the certificate"},
      // Refused at once: never a prompt on a terminal the daemon does not have.
      {"an encrypted key", kEncryptedKey, kCert, "sha256", "decrypt it first"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    auto k = SigningKey::Load(c.key, c.cert, c.hash);
    REQUIRE_FALSE(k.ok());
    CHECK_THAT(std::string(k.status().message()), Catch::Contains(c.message));
  }
  // A trailer whose length runs past the start of the module.
  std::string lying = "abc";
  lying += std::string("\0\0\x02\0\0\0\0\0\x7f\xff\xff\xff", 12);
  lying += kmodd::sign::kModuleSignatureMagic;
  auto s = kmodd::sign::StripSignature(lying);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(std::string(s.status().message()), Catch::Contains("longer than the module"));
  // Only the magic: cut short.
  REQUIRE_FALSE(kmodd::sign::StripSignature(std::string(kmodd::sign::kModuleSignatureMagic)).ok());
}
