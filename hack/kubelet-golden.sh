#!/usr/bin/env bash
# Regenerates the golden files the kubelet's own code writes
# (internal/cpumanager/state/testdata) and prints its container hashes, with
# k8s.io/kubernetes $K8S_VERSION in a scratch module made from the control
# plane's (hack/install-controlplane.sh: its go.mod and go.sum, with the
# staging replaces). Not part of the tests: the files it writes are.
set -euo pipefail
cd "$(dirname "$0")/.."
K8S_VERSION="${RIG_K8S_VERSION:-v1.37.2}"
CACHE="${NODEAGENT_RIG_CACHE:-/root/.cache/nodeagent-rig}"
SRC="$CACHE/src/kubernetes-$K8S_VERSION"
[ -f "$SRC/go.mod" ] || bash hack/install-controlplane.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$SRC/go.mod" "$SRC/go.sum" "$work/"
sed -i 's#^module .*#module kubeletgolden#' "$work/go.mod"
cp hack/kubelet-golden/main.go "$work/main.go"
sed -i '/^\/\/go:build ignore$/d' "$work/main.go"
out="$PWD/internal/cpumanager/state/testdata"
mkdir -p "$out"
(cd "$work" && CGO_ENABLED=0 go run -mod=mod . "$out")
