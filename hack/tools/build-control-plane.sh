#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver and etcd) from the Go module
# proxy into bin/k8s/<kube version>-etcd<etcd version>/, once. A warm run finds
# both binaries and returns at once; a change of the pinned versions below
# builds into a new folder.
set -euo pipefail

KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="${root}/bin/k8s/${KUBE_VERSION}-etcd${ETCD_VERSION}"

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "${dest}"
  exit 0
fi

mkdir -p "${dest}"
if [[ ! -x "${dest}/kube-apiserver" ]]; then
  echo ">> building kube-apiserver ${KUBE_VERSION} into ${dest} (once; 3 to 10 minutes on 2 cores)" >&2
  start=$(date +%s)
  (cd "${root}/hack/tools" && go build -trimpath -o "${dest}/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "${dest}/kube-apiserver.tmp" "${dest}/kube-apiserver"
  echo ">> kube-apiserver built in $(( $(date +%s) - start ))s" >&2
fi
if [[ ! -x "${dest}/etcd" ]]; then
  echo ">> building etcd ${ETCD_VERSION} into ${dest} (once; about 1 minute)" >&2
  start=$(date +%s)
  (cd "${root}/hack/tools/etcd" && go build -trimpath -o "${dest}/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "${dest}/etcd.tmp" "${dest}/etcd"
  echo ">> etcd built in $(( $(date +%s) - start ))s" >&2
fi
echo "${dest}"
