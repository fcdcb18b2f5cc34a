#!/usr/bin/env bash
# image-verify checks that the image `make image` wrote keeps the digest a
# release pins on the two paths users take it by:
#
#   1. skopeo copy --all --preserve-digests oci:DIST/image:VERSION docker://...
#      (Debian's skopeo) to a local registry (crane registry serve on
#      127.0.0.1): the registry serves the same index, by tag and by digest;
#   2. ctr -n k8s.io images import --all-platforms --digests DIST/nodepool-image.oci.tar,
#      what `kind load image-archive` runs, into a containerd of its own:
#      `ctr images ls` lists the image with the pinned digest.
#
# `make image-verify` runs it after `make image`:
#
#	hack/image-verify.sh DIST IMAGE_REPO VERSION
#
# It installs skopeo and containerd with apt-get when they are missing (as
# root), keeps everything it makes in one temporary folder, and stops the
# registry and containerd it started, by their pids, when it exits. If
# containerd cannot start here, the containerd check is skipped with a
# message; the skopeo check never is.
set -euo pipefail

if [[ $# -ne 3 ]]; then
	echo "usage: $0 DIST IMAGE_REPO VERSION" >&2
	exit 2
fi
dist=$1 repo=$2 version=$3
# crane's version is go-containerregistry's in go.mod.
crane_version=v0.22.1

log() { echo "image-verify: $*"; }
fail() {
	echo "image-verify: FAIL: $*" >&2
	exit 1
}

[[ -f $dist/image.digest && -d $dist/image && -f $dist/nodepool-image.oci.tar ]] ||
	fail "no image in $dist (run make image first)"
pinned=$(<"$dist/image.digest")
log "the pinned digest is $pinned ($repo:$version)"

if ! command -v skopeo >/dev/null || ! command -v ctr >/dev/null || ! command -v containerd >/dev/null; then
	log "installing skopeo and containerd with apt-get"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq skopeo containerd >/dev/null
fi
log "$(skopeo --version), $(containerd --version | cut -d' ' -f1,3)"

tmp=$(mktemp -d /tmp/nodepool-image-verify.XXXXXX)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# waitfor CMD... runs CMD every 0.2 s until it succeeds, for 30 s at most.
waitfor() {
	local i
	for ((i = 0; i < 150; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	return 1
}

# 1. skopeo copy to a registry on loopback.
GOBIN=$tmp/bin go install "github.com/google/go-containerregistry/cmd/crane@$crane_version"
mkdir -p "$tmp/registry"
"$tmp/bin/crane" registry serve --address 127.0.0.1:0 --disk "$tmp/registry" >"$tmp/registry.log" 2>&1 &
pids+=($!)
port_of() { sed -nE 's/.*serving on port ([0-9]+).*/\1/p' "$tmp/registry.log"; }
waitfor grep -q 'serving on port' "$tmp/registry.log" || fail "the registry did not start: $(cat "$tmp/registry.log")"
port=$(port_of)
dest=127.0.0.1:$port/nodepool
log "skopeo copy --all --preserve-digests oci:$dist/image:$version docker://$dest:$version"
skopeo copy --quiet --all --preserve-digests --dest-tls-verify=false \
	"oci:$dist/image:$version" "docker://$dest:$version" ||
	fail "skopeo copy --all --preserve-digests of the layout failed"
for ref in "$dest:$version" "$dest@$pinned"; do
	got=sha256:$(skopeo inspect --raw --tls-verify=false "docker://$ref" | sha256sum | cut -d' ' -f1)
	[[ $got == "$pinned" ]] || fail "the registry serves $ref as $got, not the pinned $pinned"
done
log "ok: the registry serves the index $pinned by tag and by digest"

# 2. containerd's import of the OCI archive, as kind load image-archive.
sock=$tmp/containerd/containerd.sock
mkdir -p "$tmp/containerd"
cat >"$tmp/containerd/config.toml" <<EOF
version = 2
root = "$tmp/containerd/root"
state = "$tmp/containerd/state"
# Importing needs no CRI (and its streaming server).
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
EOF
containerd --config "$tmp/containerd/config.toml" >"$tmp/containerd.log" 2>&1 &
pids+=($!)
if ! waitfor ctr --address "$sock" version; then
	log "SKIP: containerd did not start here, so the import is not checked:"
	tail -5 "$tmp/containerd.log" | sed 's/^/  /'
	exit 0
fi
ctr() { command ctr --address "$sock" -n k8s.io "$@"; }
log "ctr -n k8s.io images import --all-platforms --digests $dist/nodepool-image.oci.tar"
ctr images import --all-platforms --digests "$dist/nodepool-image.oci.tar" >"$tmp/import.log" 2>&1 ||
	fail "ctr images import failed: $(cat "$tmp/import.log")"
ctr images ls >"$tmp/images.txt"
got=$(awk -v ref="$repo:$version" '$1 == ref { print $3 }' "$tmp/images.txt")
[[ $got == "$pinned" ]] ||
	fail "containerd lists $repo:$version as '${got:-nothing}', not the pinned $pinned:
$(cat "$tmp/images.txt")"
grep -q "@$pinned " "$tmp/images.txt" || fail "containerd has no image named by the digest $pinned"
log "ok: containerd imports $repo:$version as $pinned"
