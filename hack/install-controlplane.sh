#!/usr/bin/env bash
# Build a real Kubernetes control plane for the API-mode e2e tests, from the
# Go module proxy, cached outside the repo (idempotent; seconds when cached):
#
#   kube-apiserver, kube-controller-manager, kubectl,
#   kubelet (the takeover tests)                       k8s.io/kubernetes $K8S_VERSION
#   kubeadm, kube-scheduler (the kubeadm init test)     k8s.io/kubernetes $K8S_VERSION
#   sample-device-plugin (the device plugin tests)     k8s.io/kubernetes $K8S_VERSION test/images
#   etcd                                               go.etcd.io/etcd/server/v3 $ETCD_VERSION
#   metrics-server (kubectl top)                       sigs.k8s.io/metrics-server $METRICS_SERVER_VERSION
#   local-path-provisioner (the PVC tests)             github.com/rancher/local-path-provisioner $LOCAL_PATH_VERSION
#
# into $NODEAGENT_RIG_CACHE/bin (default /root/.cache/nodeagent-rig/bin).
# k8s.io/kubernetes replaces its k8s.io/* staging modules with ./staging/src/…,
# so the scratch module replaces each of them with v0.<minor>.<patch>; etcd's
# server module carries replaces too, so it cannot be `go install`ed either.
# A cold build takes several minutes per binary on 2 cores.
set -euo pipefail

K8S_VERSION="${RIG_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${RIG_ETCD_VERSION:-v3.6.16}"
METRICS_SERVER_VERSION="${RIG_METRICS_SERVER_VERSION:-v0.9.0}"
LOCAL_PATH_VERSION="${RIG_LOCAL_PATH_VERSION:-v0.0.30}"
CACHE="${NODEAGENT_RIG_CACHE:-/root/.cache/nodeagent-rig}"
BIN="$CACHE/bin"
SCRATCH="$CACHE/src"

log() { echo "install-controlplane: $*" >&2; }
if ! command -v go >/dev/null 2>&1; then PATH="/usr/local/go/bin:$PATH"; fi
mkdir -p "$BIN" "$SCRATCH"
export CGO_ENABLED=0 GOFLAGS=-mod=mod

# replace_staging makes the current scratch module use k8s.io/kubernetes
# $K8S_VERSION's staging modules (its go.mod replaces them with
# ./staging/src/…) at their published v0.<minor>.<patch>.
replace_staging() {
	local modfile staging_v m
	modfile="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
	staging_v="v0.${K8S_VERSION#v1.}"
	for m in $(awk '$2 == "=>" && $3 ~ /^\.\/staging\// {print $1}' "$modfile"); do
		go mod edit -replace="$m=$m@$staging_v"
	done
}

stamp_ok() { [ -x "$BIN/$1" ] && [ -f "$BIN/.$1-version" ] && [ "$(cat "$BIN/.$1-version")" = "$2" ]; }

# ------------------------------------------------------------ kubernetes ---
k8s_bins=(kube-apiserver kube-controller-manager kubectl kubelet kube-scheduler kubeadm)
need=()
for b in "${k8s_bins[@]}"; do stamp_ok "$b" "$K8S_VERSION" || need+=("$b"); done
if [ "${#need[@]}" -eq 0 ]; then
	log "kubernetes $K8S_VERSION present in $BIN"
else
	d="$SCRATCH/kubernetes-$K8S_VERSION"
	mkdir -p "$d"
	cd "$d"
	if [ ! -f go.mod ] || ! grep -q "k8s.io/kubernetes $K8S_VERSION" go.mod; then
		log "preparing scratch module for k8s.io/kubernetes $K8S_VERSION"
		rm -f go.mod go.sum
		go mod init nodeagent-rig/kubernetes >/dev/null 2>&1
		go mod edit -require="k8s.io/kubernetes@$K8S_VERSION"
		replace_staging
		cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
		go mod tidy >/dev/null 2>&1 || go mod tidy
	fi
	# commands added since a scratch module was made are imported now
	for b in "${need[@]}"; do
		if ! grep -q "k8s.io/kubernetes/cmd/$b\"" tools.go; then
			sed -i "s|^)\$|\t_ \"k8s.io/kubernetes/cmd/$b\"\n)|" tools.go
			go mod tidy >/dev/null 2>&1 || go mod tidy
		fi
	done
	for b in "${need[@]}"; do
		log "building $b $K8S_VERSION (minutes when cold)"
		go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)" \
			-o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b"
		mv "$BIN/$b.tmp" "$BIN/$b"
		echo "$K8S_VERSION" >"$BIN/.$b-version"
	done
fi

# The kubelet's sample device plugin (example.com/resource, two devices),
# from the same scratch module: its import is added when missing.
if stamp_ok sample-device-plugin "$K8S_VERSION"; then
	log "sample-device-plugin $K8S_VERSION present in $BIN"
else
	cd "$SCRATCH/kubernetes-$K8S_VERSION"
	if ! grep -q sample-device-plugin tools.go; then
		sed -i 's|^)$|\t_ "k8s.io/kubernetes/test/images/sample-device-plugin"\n)|' tools.go
		go mod tidy >/dev/null 2>&1 || go mod tidy
	fi
	log "building sample-device-plugin $K8S_VERSION"
	go build -trimpath -ldflags "-s -w" -o "$BIN/sample-device-plugin.tmp" k8s.io/kubernetes/test/images/sample-device-plugin
	mv "$BIN/sample-device-plugin.tmp" "$BIN/sample-device-plugin"
	echo "$K8S_VERSION" >"$BIN/.sample-device-plugin-version"
fi

# ------------------------------------------------------------------ etcd ---
if stamp_ok etcd "$ETCD_VERSION"; then
	log "etcd $ETCD_VERSION present in $BIN"
else
	d="$SCRATCH/etcd-$ETCD_VERSION"
	mkdir -p "$d"
	cd "$d"
	if [ ! -f go.mod ] || ! grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION" go.mod; then
		rm -f go.mod go.sum
		go mod init nodeagent-rig/etcd >/dev/null 2>&1
		go mod edit -require="go.etcd.io/etcd/server/v3@$ETCD_VERSION"
		cat >main.go <<'GO'
// etcd built from go.etcd.io/etcd/server/v3 (the etcd command's own main).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
		go mod tidy >/dev/null 2>&1 || go mod tidy
	fi
	log "building etcd $ETCD_VERSION"
	go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" .
	mv "$BIN/etcd.tmp" "$BIN/etcd"
	echo "$ETCD_VERSION" >"$BIN/.etcd-version"
fi
# -------------------------------------------------------- metrics-server ---
# Its own scratch module, with the control plane's k8s.io/* modules (the
# same replaces): its OpenAPI model names must be the ones the apiserver
# library it is built with expects, and the packages the control plane's
# build compiled are reused. v0.8.0 built so fails at start ("cannot find
# model definition for …NodeMetrics"); v0.9.0 runs.
ms_stamp="$METRICS_SERVER_VERSION+k8s-$K8S_VERSION"
if stamp_ok metrics-server "$ms_stamp"; then
	log "metrics-server $METRICS_SERVER_VERSION present in $BIN"
else
	d="$SCRATCH/metrics-server-$ms_stamp"
	mkdir -p "$d"
	cd "$d"
	if [ ! -f go.mod ]; then
		go mod init nodeagent-rig/metrics-server >/dev/null 2>&1
		go mod edit -require="sigs.k8s.io/metrics-server@$METRICS_SERVER_VERSION"
		replace_staging
		cat >tools.go <<'GO'
//go:build tools

package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
GO
		go mod tidy >/dev/null 2>&1 || go mod tidy
	fi
	log "building metrics-server $METRICS_SERVER_VERSION against k8s.io $K8S_VERSION (minutes when cold)"
	go build -trimpath -ldflags "-s -w" -o "$BIN/metrics-server.tmp" sigs.k8s.io/metrics-server/cmd/metrics-server
	mv "$BIN/metrics-server.tmp" "$BIN/metrics-server"
	echo "$ms_stamp" >"$BIN/.metrics-server-version"
fi
# ------------------------------------------------ local-path-provisioner ---
# k3s's default storage, run as a host process by the PVC tests: its
# go.mod has no replaces, so go install builds it.
if stamp_ok local-path-provisioner "$LOCAL_PATH_VERSION"; then
	log "local-path-provisioner $LOCAL_PATH_VERSION present in $BIN"
else
	log "building local-path-provisioner $LOCAL_PATH_VERSION"
	GOFLAGS= GOBIN="$SCRATCH/local-path-bin" go install -trimpath -ldflags "-s -w" "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"
	mv "$SCRATCH/local-path-bin/local-path-provisioner" "$BIN/local-path-provisioner"
	echo "$LOCAL_PATH_VERSION" >"$BIN/.local-path-provisioner-version"
fi
log "done"
