#!/usr/bin/env bash
# `kmodd-agent pull` against a real registry: Debian's docker-registry started by
# tools/registry/start, images built with umoci and pushed with skopeo
# (tools/registry/push-image). Each case starts its own registry in a temp dir.
#
# usage: pull_test.sh BIN_DIR REPO_ROOT CASE
#        (ctest -L registry runs them all; ctest -R 'registry: hostile' some)
#
# Needs docker-registry, umoci, skopeo, htpasswd, openssl, curl and python3 (tools/bootstrap
# installs them). Without them every case FAILS: these tests never pass by skipping.
# KMODD_PULL_KEEP=1 keeps the temp dir (registry storage, caches, outputs) for a look.
#
# Cases (one ctest test each):
#   http-kmm-layout       plain HTTP: only <dirName>/lib/modules/<kernel>/ and the firmware
#                         path are extracted, byte for byte; JSON fields; Always refetches
#                         only the manifest; IfNotPresent and Never send no request; Never
#                         on an empty cache fails; HTTPS to an HTTP registry fails clearly
#   umoci-layer           an image made by `umoci insert` (a "/" root entry, no
#                         end-of-archive blocks) pulls like any other
#   https-ca              --ca works; without it a certificate error; skip-verify works
#   basic-auth            htpasswd over HTTPS: the pull secret works; none, or a wrong
#                         password, fails naming the cause
#   token-auth            bearer tokens: one token request with scope repository:REPO:pull;
#                         no secret or a wrong password fails naming the token service
#   multi-arch            an OCI index over amd64 and arm64: the amd64 content, the amd64
#                         manifest's digest (by tag and by index digest); an index without
#                         amd64 fails listing what it has
#   hostile-json          an index entry without "platform" is skipped (amd64 pulled); an
#                         index of only such entries and a pull secret whose auths entry is
#                         a string each fail naming the field (exit 1, no abort); the
#                         registry itself refuses to store an index with a string platform
#   docker-v2s2           Docker schema 2 manifest and manifest list
#   zstd                  zstd layers
#   oci-layout            oci-layout:PATH:TAG with no registry at all (gzip, zstd, index);
#                         a corrupted layout blob is refused
#   kernel-links          lib/modules/<kernel>/build and /source leaving the root are
#                         dropped; the tree has the rest
#   hostile-*             crafted layers (tests/image/hostile_layer.py), a corrupted blob, a
#                         truncated blob and a decompression bomb: refused naming the layer,
#                         the entry and the rule; nothing left in the cache but its two empty
#                         directories; nothing written outside the cache
#   hostile-dropped       the same kinds of entries outside the kept paths: dropped, pulled;
#                         a layer of deep, long paths pulled (peak RSS noted)
#   kill9-mid-pull        kill -9 in the middle of a 30 MB layer leaves no usable entry; the
#                         next pull succeeds with the right bytes
set -uo pipefail
bin="$1"
root="$2"
case_name="$3"
agent=$bin/kmodd-agent
K=6.1.0-57-cloud-amd64   # the kernel of the kept path, opt/lib/modules/$K/
P=opt/lib/modules/$K
fail() { echo "FAIL: $case_name: $*"; exit 1; }
note() { echo "# $*"; }
show() { echo "--- $(basename "$1"):"; cat "$1" 2>/dev/null; echo "---"; }
# shellcheck source=tests/lib/harness.bash
. "$root/tests/lib/harness.bash"
declare tmp
make_temp_dir tmp kmodd-pull KMODD_PULL_KEEP
# A pull in the background (kill9-mid-pull), killed as hard at exit as in the test.
bg_pid=""
kill_bg() { if [[ -n $bg_pid ]]; then kill -9 "$bg_pid" 2>/dev/null; wait "$bg_pid" 2>/dev/null; fi; }
on_exit kill_bg

require_tools /usr/bin/docker-registry umoci skopeo htpasswd openssl curl python3
require_bins "$bin" kmodd-agent
# The interpreter itself, not a version manager's shim that costs 0.2 s a call.
py=$(python3 -c 'import sys; print(sys.executable)') || fail "python3 does not run"

# --- the registry and images -------------------------------------------------------------
registry() { registry_start "$tmp/reg-$1" "$1"; }  # registry MODE: its env (KMODD_REGISTRY...) loaded

push() {  # push REPO:TAG OPTION...: push-image; sets KMODD_IMAGE, _DIGEST, _LAYOUT
  local dir=${KMODD_REGISTRY_DIR:-$tmp/no-registry}
  "$root/tools/registry/push-image" "$dir" "$@" >"$tmp/push.out" 2>"$tmp/push.err" \
    || { show "$tmp/push.out"; show "$tmp/push.err"; fail "push-image $* failed"; }
  # shellcheck source=/dev/null
  . "$tmp/push.out"
}

# layout_json LAYOUT TAG EXPR: a Python expression over the manifest `m` tagged TAG in an
# OCI layout (`d` is its digest; an index is followed to its amd64 manifest).
layout_json() {
  "$py" - "$@" <<'EOF'
import json, os, sys
layout, tag, expr = sys.argv[1:4]
blob = lambda d: json.load(open(os.path.join(layout, "blobs", "sha256", d.split(":")[1])))
index = json.load(open(os.path.join(layout, "index.json")))
d = next(m["digest"] for m in index["manifests"]
         if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
m = blob(d)
if "manifests" in m:
    d = next(x["digest"] for x in m["manifests"] if x["platform"]["architecture"] == "amd64")
    m = blob(d)
print(eval(expr))
EOF
}

blob_file() {  # blob_file DIGEST: the blob's data file in the registry's storage
  local hex=${1#sha256:}
  echo "$KMODD_REGISTRY_DIR/storage/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data"
}

# module_tree DIR [TEXT]: a KMM driver image root: two modules, firmware, and content
# outside the kept paths (a tool, another dirName, another kernel).
module_tree() {
  local d=$1 text=${2:-kmodd}
  mkdir -p "$d/$P/extra" "$d/firmware" "$d/usr/bin" "$d/opt/other" "$d/opt/lib/modules/6.1.0-0-other"
  printf '\177ELF fake kmm_ci_a for %s\n' "$text" >"$d/$P/kmm_ci_a.ko"
  head -c 3000 /dev/urandom >>"$d/$P/kmm_ci_a.ko"
  printf '\177ELF fake x for %s\n' "$text" >"$d/$P/extra/x.ko"
  chmod 0666 "$d/$P/extra/x.ko"  # extracted 0644: modes are capped
  printf 'KMMCI-FW %s\n' "$text" >"$d/firmware/kmm_ci_fw.bin"
  printf '#!/bin/sh\necho tool\n' >"$d/usr/bin/tool"
  chmod 0755 "$d/usr/bin/tool"
  echo other >"$d/opt/other/file"
  echo other-kernel >"$d/opt/lib/modules/6.1.0-0-other/y.ko"
}

# --- pulls and checks --------------------------------------------------------------------
rc=0
declare -A json=()
pull() {  # pull REF OPTION...: kmodd-agent pull -o json for kernel $K and /firmware
  "$agent" pull "$@" --kernel "$K" --firmware-path /firmware -o json >"$tmp/out" 2>"$tmp/err"
  rc=$?
  json=()
  if ((rc == 0)); then  # its fields into json[KEY] (strings bare, others as JSON)
    eval "$("$py" -c 'import json, shlex, sys
for k, v in json.load(open(sys.argv[1])).items():
    print("json[%s]=%s" % (shlex.quote(k), shlex.quote(v if isinstance(v, str) else json.dumps(v))))
' "$tmp/out")" || { show "$tmp/out"; fail "the output of pull -o json is not a JSON object"; }
  fi
}
pull_ok() {  # pull_ok WHAT REF OPTION...
  local what=$1; shift
  pull "$@"
  ((rc == 0)) || { show "$tmp/out"; show "$tmp/err"; fail "$what: exit $rc, want 0"; }
}
pull_fails() {  # pull_fails WHAT PHRASE REF OPTION...: exit 1 and PHRASE in stderr
  local what=$1 phrase=$2; shift 2
  pull "$@"
  ((rc != 0)) || { show "$tmp/out"; fail "$what: exit 0, want a failure"; }
  grep -qF -- "$phrase" "$tmp/err" || { show "$tmp/err"; fail "$what: stderr lacks: $phrase"; }
}
field() {  # field KEY: a field of the last pull's JSON output
  [[ -v json[$1] ]] || { show "$tmp/out"; fail "no field $1 in the JSON output"; }
  echo "${json[$1]}"
}
expect_eq() {  # expect_eq WHAT GOT WANT
  [[ $2 == "$3" ]] || fail "$1: got \"$2\", want \"$3\""
}
expect_field() {  # expect_field KEY WANT
  local got
  got=$(field "$1")
  [[ $got == "$2" ]] || { show "$tmp/out"; fail "$1: got \"$got\", want \"$2\""; }
}
# expect_tree TREE SRC: TREE holds exactly SRC's $P and firmware/, byte for byte.
expect_tree() {
  local tree=$1 src=$2 want=$tmp/want.$RANDOM
  mkdir -p "$want/opt/lib/modules"
  [[ -e $src/$P ]] && cp -a "$src/$P" "$want/opt/lib/modules/"
  [[ -e $src/firmware ]] && cp -a "$src/firmware" "$want/"
  [[ -d $tree ]] || fail "tree $tree is not a directory"
  diff -r --no-dereference "$want" "$tree" >"$tmp/diff" 2>&1 \
    || { show "$tmp/diff"; fail "tree $tree differs from $src's kept paths"; }
  rm -rf "$want"
}
# expect_pulled CACHE DIGEST: the last pull's tree is CACHE/trees/<digest>-<filter>.
expect_pulled() {
  local cache=$1 digest=$2 tree
  expect_field digest "$digest"
  tree=$(field tree)
  [[ $tree =~ ^$cache/trees/${digest:7:32}-[0-9a-f]{12}$ ]] \
    || fail "tree \"$tree\" is not $cache/trees/<first 32 hex of $digest>-<filter>"
}
listing() { (cd "$1" && find . -mindepth 1 | LC_ALL=C sort); }
expect_empty_cache() {  # expect_empty_cache CACHE: only trees/ and refs/, both empty
  local got
  got=$(listing "$1" | tr '\n' ' ')
  [[ $got == "./refs ./trees " ]] || fail "cache after a failed pull holds more than empty refs/ and trees/: $got"
}

# The registry's access log: one line per request ("GET /v2/... HTTP/1.1" 200 N "" "kmodd").
# The registry writes it once the response is sent, maybe after the client has exited: a
# request of our own (a sentinel) that shows up proves every earlier one has been logged.
requests=0
agent_requests() {  # agent_requests: sets $requests, the number of requests kmodd made so far
  local mark="kmodd-sentinel-${EPOCHREALTIME/./}" i
  curl -s -o /dev/null ${KMODD_REGISTRY_CA:+--cacert "$KMODD_REGISTRY_CA"} \
    "$KMODD_REGISTRY_URL/v2/$mark/tags/list"
  for i in $(seq 100); do
    grep -qF "GET /v2/$mark/" "$KMODD_REGISTRY_LOG" && break
    sleep 0.05
  done
  grep -qF "GET /v2/$mark/" "$KMODD_REGISTRY_LOG" || fail "sentinel request missing from $KMODD_REGISTRY_LOG"
  requests=$(grep -cE '^[0-9.]+ - .*"(GET|HEAD) /v2/.*"kmodd"$' "$KMODD_REGISTRY_LOG")
}
agent_lines() {  # agent_lines PATTERN: kmodd's access-log lines matching PATTERN
  grep -E '"kmodd"$' "$KMODD_REGISTRY_LOG" | grep -cE "$1"
}

micros() { local t=${EPOCHREALTIME/./}; echo "${t#0}"; }

# --- the cases ---------------------------------------------------------------------------
case_http_kmm_layout() {
  registry http
  module_tree "$tmp/src"
  push kmodd/driver:v1 --layer "$tmp/src"
  local image=$KMODD_IMAGE digest=$KMODD_IMAGE_DIGEST cache=$tmp/cache tree n0 n1 n2 n3
  local layer_bytes
  layer_bytes=$(layout_json "$KMODD_IMAGE_LAYOUT" v1 'sum(l["size"] for l in m["layers"])')
  agent_requests; n0=$requests

  pull_ok "first pull" "$image" --insecure --cache "$cache"
  expect_field image "$image"
  expect_pulled "$cache" "$digest"
  expect_field manifestFetched true
  expect_field blobBytes "$layer_bytes"
  tree=$(field tree)
  expect_tree "$tree" "$tmp/src"
  expect_eq "mode of extra/x.ko (0666 in the image)" "$(stat -c %a "$tree/$P/extra/x.ko")" 644
  expect_eq "mode of the tree" "$(stat -c %a "$tree")" 755
  expect_eq "files in refs/" "$(listing "$cache/refs" | grep -c '\.json$')" 1
  expect_eq "entries in trees/" "$(listing "$cache/trees" | grep -cv '^\./[^/]*/')" 1
  agent_requests; n1=$requests
  expect_eq "requests of the first pull" $((n1 - n0)) 2
  expect_eq "blob requests of the first pull" "$(agent_lines 'GET /v2/kmodd/driver/blobs/')" 1

  # Always: the manifest again, no blob.
  pull_ok "pull --pull-policy Always" "$image" --insecure --cache "$cache" --pull-policy Always
  expect_pulled "$cache" "$digest"
  expect_field tree "$tree"
  expect_field manifestFetched true
  expect_field blobBytes 0
  agent_requests; n2=$requests
  expect_eq "requests of the Always pull" $((n2 - n1)) 1
  expect_eq "manifest requests so far" "$(agent_lines 'GET /v2/kmodd/driver/manifests/v1 ')" 2

  # IfNotPresent (also the default) and Never: nothing at all goes to the registry.
  pull_ok "pull --pull-policy IfNotPresent" "$image" --insecure --cache "$cache" --pull-policy IfNotPresent
  expect_field manifestFetched false
  expect_field blobBytes 0
  expect_field tree "$tree"
  expect_field digest "$digest"
  pull_ok "pull (default policy)" "$image" --insecure --cache "$cache"
  expect_field manifestFetched false
  pull_ok "pull --pull-policy Never (cached)" "$image" --insecure --cache "$cache" --pull-policy Never
  expect_field manifestFetched false
  expect_field tree "$tree"
  agent_requests; n3=$requests
  expect_eq "requests of the IfNotPresent, default and Never pulls" $((n3 - n2)) 0
  expect_tree "$tree" "$tmp/src"

  # Never with an empty cache; a kernel not in the image gives an empty tree, not an error.
  pull_fails "pull --pull-policy Never (empty cache)" \
    "error: image $image is not in the cache and imagePullPolicy is Never" \
    "$image" --insecure --cache "$tmp/cache-never" --pull-policy Never
  agent_requests
  expect_eq "requests of the Never pull" $((requests - n3)) 0
  [[ ! -e $tmp/cache-never/trees || -z $(listing "$tmp/cache-never/trees") ]] \
    || fail "Never on an empty cache left something in trees/"
  pull_fails "an unknown pull policy" 'imagePullPolicy "Sometimes": expected Always, IfNotPresent or Never' \
    "$image" --insecure --cache "$cache" --pull-policy Sometimes

  # HTTPS to a plain-HTTP registry says so.
  pull_fails "HTTPS to an HTTP registry" "is it serving plain HTTP?" \
    "$image" --cache "$tmp/cache-tls"
  # A tag that is not there.
  pull_fails "a missing tag" "manifest $KMODD_REGISTRY/kmodd/driver:v2 not found" \
    "$KMODD_REGISTRY/kmodd/driver:v2" --insecure --cache "$tmp/cache-404"
}

case_umoci_layer() {
  registry http
  module_tree "$tmp/src"
  push kmodd/umoci:v1 --umoci-layer "$tmp/src"
  local image=$KMODD_IMAGE digest=$KMODD_IMAGE_DIGEST layer variant problems=()
  layer=$KMODD_IMAGE_LAYOUT/blobs/sha256/$(layout_json "$KMODD_IMAGE_LAYOUT" v1 'm["layers"][0]["digest"][7:]')
  # The two things umoci does that other writers do not, each alone in a variant of the same
  # layer (umoci raw add-layer adds nothing): a root entry named "/", and a stream that ends
  # right after the last file's data, with neither padding nor end-of-archive blocks.
  "$py" - "$layer" "$tmp" <<'EOF' || fail "cannot rewrite the umoci layer"
import gzip, sys
data = bytearray(gzip.open(sys.argv[1]).read())
if data[:2] != b"/\0" or data[-1024:] == bytes(1024):
    sys.exit("the umoci layer is not what this case expects: a \"/\" entry first, no end blocks")
def root_dot(tar):
    tar = bytearray(tar)
    tar[:2], tar[148:156] = b"./", b" " * 8
    tar[148:156] = b"%06o\0 " % sum(tar[:512])
    return tar
open(sys.argv[2] + "/dot-root.tar", "wb").write(root_dot(data))
end = bytes(-len(data) % 512 + 1024)
open(sys.argv[2] + "/end-blocks.tar", "wb").write(data + end)
open(sys.argv[2] + "/both.tar", "wb").write(root_dot(data) + end)
EOF
  for variant in dot-root end-blocks both; do
    push "kmodd/umoci:$variant" --tar "$tmp/$variant.tar"
    pull "$KMODD_IMAGE" --insecure --cache "$tmp/cache-$variant"
    ((rc == 0)) || problems+=("$variant: $(cat "$tmp/err")")
  done
  pull "$image" --insecure --cache "$tmp/cache"
  if ((rc == 0)); then
    expect_pulled "$tmp/cache" "$digest"
    expect_tree "$(field tree)" "$tmp/src"
  else
    problems+=("as made by umoci insert: $(cat "$tmp/err")")
  fi
  ((${#problems[@]} == 0)) || fail "a umoci-built image does not pull. Variants of its layer: dot-root has the \"/\" root entry renamed \"./\", end-blocks has the padding and end-of-archive blocks added, both has both changes:$(printf '\n  %s' "${problems[@]}")"
}

case_https_ca() {
  registry https
  module_tree "$tmp/src"
  push kmodd/driver:v1 --layer "$tmp/src"
  pull_ok "pull --ca" "$KMODD_IMAGE" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c1"
  expect_pulled "$tmp/c1" "$KMODD_IMAGE_DIGEST"
  expect_tree "$(field tree)" "$tmp/src"
  pull_fails "pull without --ca" \
    "TLS certificate of $KMODD_REGISTRY failed verification: unable to get local issuer certificate" \
    "$KMODD_IMAGE" --cache "$tmp/c2"
  expect_empty_cache "$tmp/c2"
  pull_ok "pull --insecure-skip-tls-verify" "$KMODD_IMAGE" --insecure-skip-tls-verify --cache "$tmp/c3"
  expect_pulled "$tmp/c3" "$KMODD_IMAGE_DIGEST"
  expect_tree "$(field tree)" "$tmp/src"
  # The CA of another registry is not this one's.
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/other.key" \
    -out "$tmp/other.pem" -days 1 -subj "/CN=other CA" >/dev/null 2>&1 || fail "openssl req failed"
  pull_fails "pull --ca OTHER" "TLS certificate of $KMODD_REGISTRY failed verification" \
    "$KMODD_IMAGE" --ca "$tmp/other.pem" --cache "$tmp/c4"
  pull_fails "pull --ca MISSING" "cannot load CA bundle $tmp/missing.pem" \
    "$KMODD_IMAGE" --ca "$tmp/missing.pem" --cache "$tmp/c5"
}

wrong_secret() {  # wrong_secret FILE: a .dockerconfigjson for this registry, wrong password
  printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$KMODD_REGISTRY" \
    "$(printf '%s:%s' "$KMODD_REGISTRY_USER" wrong-password | base64 -w0)" >"$1"
}

case_basic_auth() {
  registry basic
  module_tree "$tmp/src"
  push kmodd/driver:v1 --layer "$tmp/src"
  pull_ok "pull with the pull secret" "$KMODD_IMAGE" --pull-secret "$KMODD_REGISTRY_AUTH_FILE" \
    --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c1"
  expect_pulled "$tmp/c1" "$KMODD_IMAGE_DIGEST"
  expect_tree "$(field tree)" "$tmp/src"
  pull_fails "pull without a secret" \
    "registry $KMODD_REGISTRY requires credentials; set imageRepoSecret" \
    "$KMODD_IMAGE" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c2"
  expect_empty_cache "$tmp/c2"
  wrong_secret "$tmp/wrong.json"
  pull_fails "pull with a wrong password" \
    "registry $KMODD_REGISTRY refused the credentials of the pull secret (user \"kmodd\") for kmodd/driver; check imageRepoSecret" \
    "$KMODD_IMAGE" --pull-secret "$tmp/wrong.json" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c3"
  grep -qF "manifests/v1: HTTP 401 Unauthorized" "$tmp/err" || { show "$tmp/err"; fail "wrong password: the registry's answer is not shown"; }
  grep -qF "UNAUTHORIZED" "$tmp/err" || { show "$tmp/err"; fail "wrong password: the registry's error code is not shown"; }
  expect_empty_cache "$tmp/c3"
  # A secret without an entry for this registry is no credentials.
  printf '{"auths":{"other.example:5000":{"auth":"%s"}}}\n' "$(printf 'a:b' | base64 -w0)" >"$tmp/other.json"
  pull_fails "pull with a secret for another registry" "requires credentials" \
    "$KMODD_IMAGE" --pull-secret "$tmp/other.json" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c4"
  echo '{"not":"a dockerconfigjson"}' >"$tmp/bad.json"
  pull_fails "pull with a malformed secret" 'no "auths" object' \
    "$KMODD_IMAGE" --pull-secret "$tmp/bad.json" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c5"
}

case_token_auth() {
  registry token
  module_tree "$tmp/src"
  push kmodd/driver:v1 --layer "$tmp/src"
  : >"$KMODD_REGISTRY_TOKEN_LOG"  # forget skopeo's token requests
  pull_ok "pull with the pull secret" "$KMODD_IMAGE" --pull-secret "$KMODD_REGISTRY_AUTH_FILE" \
    --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c1"
  expect_pulled "$tmp/c1" "$KMODD_IMAGE_DIGEST"
  expect_tree "$(field tree)" "$tmp/src"
  # One token, for pull on this repository only, issued to the secret's user.
  "$py" - "$KMODD_REGISTRY_TOKEN_LOG" <<'EOF' || { show "$KMODD_REGISTRY_TOKEN_LOG"; fail "token requests are not one GET for repository:kmodd/driver:pull"; }
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = [{"method": "GET", "path": "/token", "status": 200, "account": "kmodd",
         "scopes": ["repository:kmodd/driver:pull"]}]
sys.exit(0 if lines == want else 1)
EOF
  pull_fails "pull without a secret" \
    "token service $KMODD_REGISTRY_TOKEN_REALM refused anonymous access (HTTP 401); check imageRepoSecret" \
    "$KMODD_IMAGE" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c2"
  expect_empty_cache "$tmp/c2"
  wrong_secret "$tmp/wrong.json"
  pull_fails "pull with a wrong password" \
    "token service $KMODD_REGISTRY_TOKEN_REALM refused the credentials (HTTP 401)" \
    "$KMODD_IMAGE" --pull-secret "$tmp/wrong.json" --ca "$KMODD_REGISTRY_CA" --cache "$tmp/c3"
  expect_empty_cache "$tmp/c3"
}

# index_child REF ARCH: the digest of ARCH's manifest in the index the registry serves for REF.
index_child() {
  curl -sf ${KMODD_REGISTRY_CA:+--cacert "$KMODD_REGISTRY_CA"} \
    -H "Accept: application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json" \
    "$KMODD_REGISTRY_URL/v2/$1" \
    | "$py" -c 'import json,sys; print(next(m["digest"] for m in json.load(sys.stdin)["manifests"] if m["platform"]["architecture"]==sys.argv[1]))' "$2"
}
content_type() {  # content_type REPO/manifests/REF: the media type the registry serves
  curl -sfI ${KMODD_REGISTRY_CA:+--cacert "$KMODD_REGISTRY_CA"} \
    -H "Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json" \
    "$KMODD_REGISTRY_URL/v2/$1" | tr -d '\r' | sed -n 's/^[Cc]ontent-[Tt]ype: //p'
}

case_multi_arch() {
  [[ $(uname -m) == x86_64 ]] \
    || fail "this case expects an x86_64 host (kmodd-agent pull picks linux/amd64), not $(uname -m)"
  registry http
  module_tree "$tmp/src-amd64" amd64
  module_tree "$tmp/src-arm64" arm64
  push kmodd/multi:v1 --layer "$tmp/src-{arch}" --arch amd64,arm64
  local index=$KMODD_IMAGE_DIGEST amd64
  expect_eq "media type of the pushed index" "$(content_type kmodd/multi/manifests/v1)" \
    application/vnd.oci.image.index.v1+json
  amd64=$(index_child kmodd/multi/manifests/v1 amd64)
  [[ $amd64 == sha256:* && $amd64 != "$index" ]] || fail "no amd64 manifest in index $index"
  # The digest printed (and the tree's name) is the chosen platform manifest's, not the index's.
  pull_ok "pull by tag" "$KMODD_IMAGE" --insecure --cache "$tmp/c1"
  expect_pulled "$tmp/c1" "$amd64"
  expect_tree "$(field tree)" "$tmp/src-amd64"
  pull_ok "pull by index digest" "$KMODD_REGISTRY/kmodd/multi@$index" --insecure --cache "$tmp/c2"
  expect_pulled "$tmp/c2" "$amd64"
  expect_tree "$(field tree)" "$tmp/src-amd64"
  pull_ok "pull by tag and digest" "$KMODD_IMAGE@$index" --insecure --cache "$tmp/c2"
  expect_pulled "$tmp/c2" "$amd64"
  # An index without linux/amd64.
  module_tree "$tmp/src-s390x" s390x
  push kmodd/multi:other --layer "$tmp/src-{arch}" --arch arm64,s390x
  pull_fails "pull of an index without amd64" \
    "the image index has no linux/amd64 manifest (it has: linux/arm64, linux/s390x)" \
    "$KMODD_IMAGE" --insecure --cache "$tmp/c4"
  expect_empty_cache "$tmp/c4"
}

# edited_index REPO/manifests/REF EXPR FILE: the index the registry serves, with the Python
# statement EXPR run on it (as `m`), written to FILE.
edited_index() {
  curl -sf -H "Accept: application/vnd.oci.image.index.v1+json" "$KMODD_REGISTRY_URL/v2/$1" \
    | "$py" -c 'import json,sys; m = json.load(sys.stdin); exec(sys.argv[1]); print(json.dumps(m))' \
      "$2" >"$3" || fail "cannot read and edit the index $1"
}
put_index() {  # put_index REPO TAG FILE
  curl -sf -X PUT -H "Content-Type: application/vnd.oci.image.index.v1+json" \
    --data-binary "@$3" "$KMODD_REGISTRY_URL/v2/$1/manifests/$2" >/dev/null \
    || fail "the registry refused the index $3 for $1:$2"
}

# Registry and pull-secret JSON the spec allows or an attacker writes (issue 12): each is
# read as the spec says or refused naming the field, with exit 1, never an abort.
case_hostile_json() {
  [[ $(uname -m) == x86_64 ]] || fail "this case expects an x86_64 host, not $(uname -m)"
  registry http
  module_tree "$tmp/src-amd64" amd64
  module_tree "$tmp/src-arm64" arm64
  push kmodd/multi:v1 --layer "$tmp/src-{arch}" --arch amd64,arm64
  local amd64
  amd64=$(index_child kmodd/multi/manifests/v1 amd64)
  # "platform" is optional in an OCI index: the entry without one (first) is skipped, amd64
  # pulled.
  edited_index kmodd/multi/manifests/v1 \
    'a = [x for x in m["manifests"] if x["platform"]["architecture"] == "arm64"][0]; del a["platform"]; m["manifests"].remove(a); m["manifests"].insert(0, a)' \
    "$tmp/noplatform.json"
  put_index kmodd/multi noplatform "$tmp/noplatform.json"
  pull_ok "pull of an index with an entry without platform" "$KMODD_REGISTRY/kmodd/multi:noplatform" \
    --insecure --cache "$tmp/c1"
  expect_pulled "$tmp/c1" "$amd64"
  expect_tree "$(field tree)" "$tmp/src-amd64"
  # Only entries without a platform: nothing fits, and the error says why.
  edited_index kmodd/multi/manifests/v1 \
    'm["manifests"] = [x for x in m["manifests"] if x["platform"]["architecture"] == "arm64"]; del m["manifests"][0]["platform"]' \
    "$tmp/onlynoplatform.json"
  put_index kmodd/multi onlynoplatform "$tmp/onlynoplatform.json"
  pull_fails "pull of an index whose entries name no platform" \
    "has no linux/amd64 manifest (it has: manifests[0] without a platform)" \
    "$KMODD_REGISTRY/kmodd/multi:onlynoplatform" --insecure --cache "$tmp/c2"
  ((rc == 1)) || fail "pull of an index whose entries name no platform: exit $rc, want 1"
  # A pull secret whose auths entry is not an object.
  printf '{"auths":{"%s":"%s"}}\n' "$KMODD_REGISTRY" "$(printf 'u:p' | base64 -w0)" >"$tmp/secret"
  pull_fails "pull with a pull secret whose entry is a string" \
    "pull secret: auths[\"$KMODD_REGISTRY\"]: expected an object, got a string" \
    "$KMODD_REGISTRY/kmodd/multi:v1" --insecure --pull-secret "$tmp/secret" --cache "$tmp/c4"
  ((rc == 1)) || fail "pull with a pull secret whose entry is a string: exit $rc, want 1"
}

case_docker_v2s2() {
  registry http
  module_tree "$tmp/src-amd64" amd64
  module_tree "$tmp/src-arm64" arm64
  push kmodd/docker:single --layer "$tmp/src-amd64" --format v2s2
  expect_eq "media type of the pushed manifest" "$(content_type kmodd/docker/manifests/single)" \
    application/vnd.docker.distribution.manifest.v2+json
  pull_ok "pull of a schema 2 manifest" "$KMODD_IMAGE" --insecure --cache "$tmp/c1"
  expect_pulled "$tmp/c1" "$KMODD_IMAGE_DIGEST"
  expect_tree "$(field tree)" "$tmp/src-amd64"

  push kmodd/docker:list --layer "$tmp/src-{arch}" --arch amd64,arm64 --format v2s2
  expect_eq "media type of the pushed list" "$(content_type kmodd/docker/manifests/list)" \
    application/vnd.docker.distribution.manifest.list.v2+json
  local amd64
  amd64=$(index_child kmodd/docker/manifests/list amd64)
  pull_ok "pull of a manifest list" "$KMODD_IMAGE" --insecure --cache "$tmp/c2"
  expect_pulled "$tmp/c2" "$amd64"
  expect_tree "$(field tree)" "$tmp/src-amd64"
}

case_zstd() {
  registry http
  module_tree "$tmp/src"
  push kmodd/zstd:v1 --layer "$tmp/src" --compress zstd
  expect_eq "layer media type" "$(layout_json "$KMODD_IMAGE_LAYOUT" v1 'm["layers"][0]["mediaType"]')" \
    application/vnd.oci.image.layer.v1.tar+zstd
  pull_ok "pull of a zstd image" "$KMODD_IMAGE" --insecure --cache "$tmp/c1"
  expect_pulled "$tmp/c1" "$KMODD_IMAGE_DIGEST"
  expect_field blobBytes "$(layout_json "$KMODD_IMAGE_LAYOUT" v1 'm["layers"][0]["size"]')"
  expect_tree "$(field tree)" "$tmp/src"
}

case_oci_layout() {
  module_tree "$tmp/src"
  module_tree "$tmp/src-amd64" amd64
  module_tree "$tmp/src-arm64" arm64
  local digest layout
  # No registry is started in this case: push-image --no-push only builds layouts.
  push kmodd/layout:v1 --layer "$tmp/src" --no-push --work "$tmp/img-gzip"
  layout=$KMODD_IMAGE_LAYOUT
  digest=$(layout_json "$layout" v1 d)
  pull_ok "pull oci-layout:" "oci-layout:$layout:v1" --cache "$tmp/c1"
  expect_field image "oci-layout:$layout:v1"
  expect_pulled "$tmp/c1" "$digest"
  expect_field manifestFetched false
  expect_field blobBytes 0
  expect_tree "$(field tree)" "$tmp/src"
  pull_ok "pull oci-layout: again" "oci-layout:$layout:v1" --cache "$tmp/c1" --pull-policy Always
  expect_pulled "$tmp/c1" "$digest"

  push kmodd/layout:v1 --layer "$tmp/src" --compress zstd --no-push --work "$tmp/img-zstd"
  pull_ok "pull a zstd oci-layout:" "oci-layout:$KMODD_IMAGE_LAYOUT:v1" --cache "$tmp/c2"
  expect_pulled "$tmp/c2" "$(layout_json "$KMODD_IMAGE_LAYOUT" v1 d)"
  expect_tree "$(field tree)" "$tmp/src"

  push kmodd/layout:v1 --layer "$tmp/src-{arch}" --arch amd64,arm64 --no-push --work "$tmp/img-multi"
  pull_ok "pull a multi-arch oci-layout:" "oci-layout:$KMODD_IMAGE_LAYOUT:v1" --cache "$tmp/c3"
  expect_pulled "$tmp/c3" "$(layout_json "$KMODD_IMAGE_LAYOUT" v1 d)"
  expect_tree "$(field tree)" "$tmp/src-amd64"

  pull_fails "an unknown tag" "no manifest v9" "oci-layout:$layout:v9" --cache "$tmp/c4"
  # A layer blob whose bytes changed (the gzip header's MTIME: still a valid stream).
  local blob
  blob=$layout/blobs/sha256/$(layout_json "$layout" v1 'm["layers"][0]["digest"][7:]')
  printf '\xde\xad\xbe\xef' | dd of="$blob" bs=1 seek=4 conv=notrunc status=none
  pull_fails "a corrupted layout blob" "does not match its descriptor" \
    "oci-layout:$layout:v1" --cache "$tmp/c5"
  expect_empty_cache "$tmp/c5"
}

# --- hostile images ----------------------------------------------------------------------
# Every pull below runs with its cache at $sandbox/cache beside $sandbox/outside, which holds
# a canary and is where the crafted entries aim; after the pull nothing outside the cache
# may be newer than the marker.
sandbox=$tmp/sandbox
sandbox_reset() {
  rm -rf "$sandbox"
  mkdir -p "$sandbox/cache" "$sandbox/outside"
  echo canary >"$sandbox/outside/canary"
  touch "$tmp/marker"
  sleep 0.05  # past the file system's timestamp granularity
}
expect_nothing_outside() {  # expect_nothing_outside WHAT
  local stray
  stray=$(find "$sandbox" -newer "$tmp/marker" ! -path "$sandbox/cache" ! -path "$sandbox/cache/*")
  [[ -z $stray ]] || fail "$1: written outside the cache: $stray"
  expect_eq "$1: $sandbox/outside" "$(listing "$sandbox/outside" | tr '\n' ' ')" "./canary "
  expect_eq "$1: the canary" "$(cat "$sandbox/outside/canary")" canary
  [[ ! -e /etc/kmodd-test-pwned && ! /etc/passwd -nt "$tmp/marker" ]] || fail "$1: /etc was written"
}
# expect_refused WHAT ERROR...: the pull of $KMODD_IMAGE into the sandbox fails, stderr
# holds each ERROR, the cache is left with empty trees/ and refs/, nothing else changed.
expect_refused() {
  local what=$1; shift
  sandbox_reset
  pull "$KMODD_IMAGE" --insecure --cache "$sandbox/cache"
  ((rc != 0)) || { show "$tmp/out"; fail "$what: pulled, want a refusal"; }
  local e
  for e in "$@"; do
    grep -qF -- "$e" "$tmp/err" || { show "$tmp/err"; fail "$what: stderr lacks: $e"; }
  done
  expect_empty_cache "$sandbox/cache"
  expect_nothing_outside "$what"
  note "$what: $(cat "$tmp/err")"
}
# hostile LAYER ENTRY RULE: an image of hostile_layer.py's LAYER is refused with
#   error: IMAGE: layer sha256:...: entry "ENTRY": RULE
hostile() {
  local layer=$1 entry=$2 rule=$3
  "$py" "$root/tests/image/hostile_layer.py" "$layer" "$tmp/$layer.tar" "$K" "$sandbox/outside" \
    || fail "hostile_layer.py $layer failed"
  push "kmodd/hostile:$layer" --tar "$tmp/$layer.tar"
  local digest
  digest=$(layout_json "$KMODD_IMAGE_LAYOUT" "$layer" 'm["layers"][-1]["digest"]')
  expect_refused "$layer" "error: $KMODD_IMAGE: layer $digest: entry \"$entry\": $rule"
}

case_hostile_dotdot() {
  registry http
  hostile dotdot "$P/../../../../../../../outside/kmodd-pwned" "path has a '..' component"
}
case_hostile_absolute() {
  registry http
  hostile absolute "/$P/abs.ko" "absolute path"
  hostile absolute-outside "$sandbox/outside/kmodd-pwned" "absolute path"
}
case_hostile_symlink() {
  registry http
  hostile symlink-etc "$P/evil" 'symlink target "/etc" is absolute (it would leave the image root)'
  hostile symlink-abs-outside "$P/evil" "symlink target \"$sandbox/outside\" is absolute"
  hostile symlink-climb "$P/evil" 'symlink target "../../../../../.." escapes the image root'
  hostile symlink-climb-outside "$P/evil" 'symlink target "../../../../../../../outside" escapes the image root'
  hostile symlink-name-then-climb "$P/evil" "symlink target \"extra/../../../../../../../outside\" has '..' after a name"
  # Only <dirName>/lib/modules/<kernel>/{build,source} are forgiven (kernel-links).
  hostile symlink-deep-build "$P/extra/build" "symlink target \"/usr/src/linux-headers-$K\" is absolute"
}
case_hostile_hardlink() {
  registry http
  hostile hardlink-etc-passwd "$P/passwd" 'hardlink target "/etc/passwd": absolute path'
  hostile hardlink-climb-outside "$P/canary" "hardlink target \"$P/../../../../../../../outside/canary\": path has a '..' component"
  hostile hardlink-dropped "$P/tool" 'hardlink target "usr/bin/tool" is outside the extracted paths'
}
case_hostile_write_through_symlink() {
  registry http
  hostile write-through-symlink "$P/d/f" "$P/d: is a symlink; refusing to write through it"
  hostile write-through-symlink-dir "$P/d/f" "$P/d: is a symlink; refusing to write through it"
}
case_hostile_devices() {
  registry http
  hostile char-device "$P/null" "character device not allowed"
  hostile block-device "$P/sda" "block device not allowed"
  hostile fifo "$P/fifo" "fifo not allowed"
}
case_hostile_setuid() {
  registry http
  hostile setuid "$P/suid.ko" "setuid/setgid file not allowed (mode 4755)"
  hostile setgid "$P/sgid.ko" "setuid/setgid file not allowed (mode 2755)"
}

# A well-formed image whose layer blob is changed in the registry's storage after the push.
corrupt_blob_image() {  # corrupt_blob_image TAG: sets layer_digest and layer_data
  module_tree "$tmp/src"
  push "kmodd/corrupt:$1" --layer "$tmp/src"
  layer_digest=$(layout_json "$KMODD_IMAGE_LAYOUT" "$1" 'm["layers"][0]["digest"]')
  layer_size=$(layout_json "$KMODD_IMAGE_LAYOUT" "$1" 'm["layers"][0]["size"]')
  layer_data=$(blob_file "$layer_digest")
  [[ -f $layer_data ]] || fail "layer blob $layer_data not in the registry's storage"
}
case_hostile_wrong_digest() {
  registry http
  corrupt_blob_image v1
  # The gzip header's MTIME: the stream still decompresses, only the digest tells.
  printf '\xde\xad\xbe\xef' | dd of="$layer_data" bs=1 seek=4 conv=notrunc status=none
  expect_refused "wrong digest (gzip header)" \
    "error: $KMODD_IMAGE: blob $layer_digest has the wrong content (digest sha256:"
  # In the middle of the deflate data: the decompressor may see it first, or the digest.
  corrupt_blob_image v2
  printf '\xde\xad\xbe\xef\xde\xad\xbe\xef' | dd of="$layer_data" bs=1 seek=$((layer_size / 2)) conv=notrunc status=none
  expect_refused "wrong digest (deflate data)" "error: $KMODD_IMAGE: "
  grep -qE "blob $layer_digest has the wrong content|layer $layer_digest: .*gzip: corrupt data" "$tmp/err" \
    || { show "$tmp/err"; fail "corrupt deflate data: neither a digest nor a gzip error"; }
}
case_hostile_truncated_blob() {
  registry http
  corrupt_blob_image v1
  truncate -s $((layer_size / 2)) "$layer_data"
  # The registry sends the short blob with a matching Content-Length; the client then asks
  # for the rest with a Range request, which docker-registry 2.8 answers 416 with the whole
  # blob's Content-Length and a 33-byte body: a broken response, retried, then reported.
  expect_refused "truncated blob" "error: $KMODD_IMAGE: blob $layer_digest"
  grep -qE "is truncated: $((layer_size / 2)) of $layer_size bytes|/blobs/$layer_digest \(read body\): connection closed early" "$tmp/err" \
    || { show "$tmp/err"; fail "truncated blob: neither \"truncated\" nor the broken resume named"; }
}
case_hostile_bomb() {
  registry http
  # 256 MiB of zeros in one kept file: a sparse tar, which umoci gzips ~400:1.
  "$py" - "$tmp/bomb.tar" "$P/bomb.ko" $((256 << 20)) <<'EOF' || fail "cannot write the bomb"
import sys, tarfile
out, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
info = tarfile.TarInfo(name)
info.size, info.mode = size, 0o644
with open(out, "wb") as f:
    f.write(info.tobuf(tarfile.PAX_FORMAT))
    f.truncate(512 + (size + 511) // 512 * 512 + 1024)  # zero data, zero end blocks
EOF
  push kmodd/bomb:v1 --tar "$tmp/bomb.tar"
  rm -f "$tmp/bomb.tar"
  local digest start took
  digest=$(layout_json "$KMODD_IMAGE_LAYOUT" v1 'm["layers"][0]["digest"]')
  start=$(micros)
  expect_refused "decompression bomb" \
    "error: $KMODD_IMAGE: layer $digest: entry \"$P/bomb.ko\": decompression ratio reached 100:1 (" \
    "compressed): a decompression bomb"
  took=$((($(micros) - start) / 1000))
  ((took < 5000)) || fail "the bomb took $took ms to refuse: it was not stopped early"
}

case_hostile_dropped() {
  registry http
  local layer tree
  for layer in dropped-entries parent-symlink; do
    "$py" "$root/tests/image/hostile_layer.py" "$layer" "$tmp/$layer.tar" "$K" "$sandbox/outside" \
      || fail "hostile_layer.py $layer failed"
    push "kmodd/dropped:$layer" --tar "$tmp/$layer.tar"
    sandbox_reset
    pull_ok "$layer" "$KMODD_IMAGE" --insecure --cache "$sandbox/cache"
    expect_nothing_outside "$layer"
    tree=$(field tree)
    # Real directories and files only. (parent-symlink's "opt" symlink, dropped, comes after
    # kmm_ci_a.ko in the same layer: whether that removes kmm_ci_a.ko is not asserted here.)
    [[ -z $(find "$tree" ! -type d ! -type f) ]] || fail "$layer: the tree holds other than files and directories"
    [[ -f $tree/$P/kmm_ci_a.ko || $layer == parent-symlink ]] || fail "$layer: kmm_ci_a.ko is missing"
    [[ -f $tree/$P/extra/x.ko || $layer == dropped-entries ]] || fail "$layer: extra/x.ko is missing"
    expect_eq "$layer: top of the tree" "$(listing "$tree" | grep -c '^\./[^/]*$')" 1
  done
  # Deep, long paths (hostile_layer.py deep-paths): pulled, each round's file in place. The
  # memory bound itself is asserted in the applier's unit test; the peak RSS is a figure.
  "$py" "$root/tests/image/hostile_layer.py" deep-paths "$tmp/deep.tar" "$K" "$sandbox/outside" \
    || fail "hostile_layer.py deep-paths failed"
  push kmodd/dropped:deep-paths --tar "$tmp/deep.tar"
  sandbox_reset
  /usr/bin/time -f %M -o "$tmp/rss" "$agent" pull "$KMODD_IMAGE" --insecure --cache "$sandbox/cache" \
    --kernel "$K" --firmware-path /firmware -o json >"$tmp/out" 2>"$tmp/err" \
    || { show "$tmp/err"; fail "deep-paths: the pull failed"; }
  tree=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["tree"])' "$tmp/out")
  expect_eq "deep-paths: files in $P" "$(listing "$tree/$P" | grep -c '^\./r[0-9]*$')" 20
  expect_nothing_outside deep-paths
  note "deep-paths (20 rounds of 127-component, 3.9 KiB paths): peak RSS $(tail -1 "$tmp/rss") KiB"
}

case_kernel_links() {
  registry http
  "$py" "$root/tests/image/hostile_layer.py" kernel-links "$tmp/links.tar" "$K" "$sandbox/outside" \
    || fail "hostile_layer.py kernel-links failed"
  push kmodd/links:v1 --tar "$tmp/links.tar"
  sandbox_reset
  pull_ok "pull of an image with lib/modules/$K/build and source" "$KMODD_IMAGE" --insecure --cache "$sandbox/cache"
  expect_nothing_outside "kernel links"
  local tree
  tree=$(field tree)
  expect_eq "the tree" "$(listing "$tree" | tr '\n' ' ')" \
    "./opt ./opt/lib ./opt/lib/modules ./$P ./$P/extra ./$P/extra/x.ko ./$P/kmm_ci_a.ko "
  # The same link one level deeper is an escape like any other: refused (hostile-symlink).
}

case_kill9() {
  registry http
  mkdir -p "$tmp/big/$P" "$tmp/big/firmware"
  head -c $((30 << 20)) /dev/urandom >"$tmp/big/$P/big.ko"
  echo small >"$tmp/big/$P/small.ko"
  echo fw >"$tmp/big/firmware/fw.bin"
  push kmodd/big:v1 --layer "$tmp/big"
  local attempt cache caught=0 partial i status
  for attempt in 1 2 3 4 5; do
    cache=$tmp/kill-$attempt
    "$agent" pull "$KMODD_IMAGE" --insecure --cache "$cache" --kernel "$K" --firmware-path /firmware \
      >"$tmp/kill.out" 2>&1 &
    bg_pid=$!
    # Kill it once the staging directory holds part of big.ko.
    for i in $(seq 20000); do
      partial=$(compgen -G "$cache/trees/.*.partial-*/$P/big.ko")
      if [[ -n $partial && -s $partial ]]; then
        kill -9 "$bg_pid" 2>/dev/null && caught=1
        break
      fi
      kill -0 "$bg_pid" 2>/dev/null || break
    done
    wait "$bg_pid" 2>/dev/null
    status=$?
    bg_pid=""
    ((caught)) && { expect_eq "exit status of the killed pull" "$status" 137; break; }
    note "attempt $attempt: the pull ended before it could be killed mid-way (exit $status); again"
  done
  ((caught)) || fail "the pull never could be killed mid-way in 5 attempts"
  note "killed with $(stat -c %s "$partial") of $((30 << 20)) bytes of big.ko written"
  # No usable entry: no tree, no reference record; at most the staging leftover.
  local left
  left=$(listing "$cache/trees" | grep -v '^\./\.[^/]*\.partial-[A-Za-z0-9]\{6\}\(/\|$\)' | tr '\n' ' ')
  [[ -z $left ]] || fail "after kill -9, trees/ holds more than a staging leftover: $left"
  [[ -z $(listing "$cache/refs") ]] || fail "after kill -9, refs/ is not empty: $(listing "$cache/refs")"
  pull_fails "pull --pull-policy Never after kill -9" "is not in the cache and imagePullPolicy is Never" \
    "$KMODD_IMAGE" --insecure --cache "$cache" --pull-policy Never
  pull_ok "pull after kill -9" "$KMODD_IMAGE" --insecure --cache "$cache"
  expect_pulled "$cache" "$KMODD_IMAGE_DIGEST"
  expect_field manifestFetched true
  expect_tree "$(field tree)" "$tmp/big"
  local leftovers
  leftovers=$(compgen -G "$cache/trees/.*.partial-*" | wc -l)
  note "staging leftovers in trees/ after the next pull: $leftovers (removed by Prune, not by pull)"
}

start=$(micros)
case "$case_name" in
  http-kmm-layout) case_http_kmm_layout ;;
  umoci-layer) case_umoci_layer ;;
  https-ca) case_https_ca ;;
  basic-auth) case_basic_auth ;;
  token-auth) case_token_auth ;;
  multi-arch) case_multi_arch ;;
  hostile-json) case_hostile_json ;;
  docker-v2s2) case_docker_v2s2 ;;
  zstd) case_zstd ;;
  oci-layout) case_oci_layout ;;
  kernel-links) case_kernel_links ;;
  hostile-dotdot) case_hostile_dotdot ;;
  hostile-absolute) case_hostile_absolute ;;
  hostile-symlink) case_hostile_symlink ;;
  hostile-hardlink) case_hostile_hardlink ;;
  hostile-write-through-symlink) case_hostile_write_through_symlink ;;
  hostile-devices) case_hostile_devices ;;
  hostile-setuid) case_hostile_setuid ;;
  hostile-wrong-digest) case_hostile_wrong_digest ;;
  hostile-truncated-blob) case_hostile_truncated_blob ;;
  hostile-bomb) case_hostile_bomb ;;
  hostile-dropped) case_hostile_dropped ;;
  kill9-mid-pull) case_kill9 ;;
  *) fail "unknown case $case_name" ;;
esac
took=$((($(micros) - start) / 100000))
echo "ok: $case_name ($((took / 10)).$((took % 10)) s)"
