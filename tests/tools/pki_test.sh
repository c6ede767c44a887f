#!/usr/bin/env bash
# tools/pki/make-dev-certs, checked with openssl itself: chains, names, usages, modes and
# what a second run keeps. Usage: pki_test.sh SOURCE_DIR
set -euo pipefail
src=$1
mk="$src/tools/pki/make-dev-certs"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
d="$work/pki"
fail() { echo "FAIL: $*" >&2; exit 1; }
fingerprint() { openssl x509 -in "$1" -noout -fingerprint -sha256; }
text() { openssl x509 -in "$1" -noout -text; }

"$mk" "$d" --controller-host ctl.example.com --controller-host 192.168.7.5 \
  --node worker-1 --node gpu-2.lab >"$work/out"

for c in controller node-worker-1 node-gpu-2.lab; do
  openssl verify -CAfile "$d/ca.pem" "$d/$c.pem" >/dev/null || fail "$c.pem does not verify against ca.pem"
  [[ $(openssl x509 -in "$d/$c.pem" -noout -pubkey) == "$(openssl pkey -in "$d/$c.key" -pubout)" ]] ||
    fail "$c.key is not the key of $c.pem"
  text "$d/$c.pem" | grep -q "ASN1 OID: prime256v1" || fail "$c.key is not P-256"
  [[ $(stat -c %a "$d/$c.key") == 600 ]] || fail "$c.key is not mode 0600"
  text "$d/$c.pem" | grep -q "CA:FALSE" || fail "$c.pem is not an end-entity certificate"
done
[[ $(stat -c %a "$d/ca.key") == 600 ]] || fail "ca.key is not mode 0600"
text "$d/ca.pem" | grep -q "CA:TRUE" || fail "ca.pem is not a CA"

ctl=$(text "$d/controller.pem")
for san in "IP Address:127.0.0.1" "IP Address:10.0.2.2" "DNS:localhost" "DNS:ctl.example.com" \
           "IP Address:192.168.7.5"; do
  grep -q "$san" <<<"$ctl" || fail "controller.pem lacks SAN $san"
done
grep -q "TLS Web Server Authentication, TLS Web Client Authentication" <<<"$ctl" ||
  fail "controller.pem lacks serverAuth+clientAuth"
openssl verify -CAfile "$d/ca.pem" -purpose sslserver "$d/controller.pem" >/dev/null ||
  fail "controller.pem is not good for a TLS server"

node=$(text "$d/node-worker-1.pem")
grep -q "Subject: CN = worker-1" <<<"$node" || fail "node-worker-1.pem CN is not worker-1"
grep -q "DNS:worker-1$" <<<"$node" || fail "node-worker-1.pem SAN is not DNS:worker-1"
grep -q "TLS Web Client Authentication$" <<<"$node" || fail "node cert EKU is not clientAuth only"
openssl verify -CAfile "$d/ca.pem" -purpose sslclient "$d/node-worker-1.pem" >/dev/null ||
  fail "node-worker-1.pem is not good for a TLS client"
if openssl verify -CAfile "$d/ca.pem" -purpose sslserver "$d/node-worker-1.pem" >/dev/null 2>&1; then
  fail "node-worker-1.pem must not serve TLS"
fi

# A second run keeps the CA and every certificate whose names did not change...
ca_before=$(fingerprint "$d/ca.pem")
node_before=$(fingerprint "$d/node-worker-1.pem")
ctl_before=$(fingerprint "$d/controller.pem")
"$mk" "$d" --controller-host ctl.example.com --controller-host 192.168.7.5 --node worker-1 >"$work/out"
[[ $(fingerprint "$d/ca.pem") == "$ca_before" ]] || fail "a second run replaced the CA"
[[ $(fingerprint "$d/node-worker-1.pem") == "$node_before" ]] || fail "a second run reissued node-worker-1"
[[ $(fingerprint "$d/controller.pem") == "$ctl_before" ]] || fail "a second run reissued the controller"
# ...and reissues one whose names changed.
"$mk" "$d" --controller-host other.example.com >"$work/out"
grep -q "issued $d/controller.pem" "$work/out" || fail "changed hosts did not reissue controller.pem"
text "$d/controller.pem" | grep -q "DNS:other.example.com" || fail "reissued controller.pem lacks the new host"

# --force: a new CA, and everything reissued under it.
"$mk" "$d" --node worker-1 --force >"$work/out"
[[ $(fingerprint "$d/ca.pem") != "$ca_before" ]] || fail "--force kept the CA"
openssl verify -CAfile "$d/ca.pem" "$d/node-worker-1.pem" >/dev/null || fail "--force did not reissue node-worker-1"

# Clear errors.
expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1
  shift
  if "$mk" "$@" >"$work/out" 2>&1; then fail "make-dev-certs $* succeeded"; fi
  grep -q -- "$pattern" "$work/out" || fail "make-dev-certs $*: wanted \"$pattern\", got: $(cat "$work/out")"
}
expect_error "is not a valid node name" "$d" --node "Bad_Name"
expect_error "neither an IP address nor a DNS name" "$d" --controller-host "bad host"
rm "$d/ca.pem"
expect_error "only one of" "$d"
expect_error "usage:" --node x
echo "ok"
