#!/usr/bin/env bash
# Install everything the nodeagent e2e rig (hack/rig.sh) needs on a Debian 12
# machine. Idempotent and quick (<5 s) when everything is already present.
#
#   - Debian packages: containerd runc containernetworking-plugins busybox-static
#     docker-registry skopeo iproute2 iptables gcc libc6-dev curl
#     (apt-get update only when something is missing)
#   - containerd v2.4.2 + containerd-shim-runc-v2, built with `go install`
#   - crictl v1.37.0, built with `go install`
#   both into $NODEAGENT_RIG_CACHE/bin (default /root/.cache/nodeagent-rig/bin)
#   - the CNI plugins v1.10.0 (CNI spec 1.1: STATUS, GC) bridge host-local
#     loopback portmap bandwidth, built with `go install` into its bin/cni;
#     the rig's default variant uses them, RIG_CONTAINERD=debian keeps
#     Debian's older /usr/lib/cni ones (the fallback an operator may have).
#
# Works non-interactively (CI=true); needs root for apt-get.
set -euo pipefail

CONTAINERD_VERSION="${RIG_CONTAINERD_VERSION:-v2.4.2}"
CRICTL_VERSION="${RIG_CRICTL_VERSION:-v1.37.0}"
CNI_PLUGINS_VERSION="${RIG_CNI_PLUGINS_VERSION:-v1.10.0}"
CNI_PLUGINS=(main/bridge ipam/host-local main/loopback meta/portmap meta/bandwidth)
CACHE="${NODEAGENT_RIG_CACHE:-/root/.cache/nodeagent-rig}"
BIN="$CACHE/bin"

log() { echo "install-deps: $*" >&2; }

# ---------------------------------------------------------------- apt ---
PKGS=(containerd runc containernetworking-plugins busybox-static docker-registry
	skopeo iproute2 iptables nftables dbus-daemon gcc libc6-dev curl)
missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ "${#missing[@]}" -gt 0 ]; then
	log "apt: installing ${missing[*]}"
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: must run as root to apt-get install ${missing[*]}" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${missing[@]}"
else
	log "apt: all packages present"
fi

# ----------------------------------------------------------------- go ---
if ! command -v go >/dev/null 2>&1; then
	for d in /usr/local/go/bin /usr/lib/go/bin; do
		[ -x "$d/go" ] && PATH="$d:$PATH"
	done
fi
need_go() {
	command -v go >/dev/null 2>&1 || {
		echo "install-deps: 'go' not found; needed to build $1" >&2
		exit 1
	}
}
mkdir -p "$BIN"

# ---------------------------------------------------------- containerd ---
have_containerd=0
if [ -x "$BIN/containerd" ] && [ -x "$BIN/containerd-shim-runc-v2" ]; then
	# "containerd github.com/containerd/containerd/v2 v2.4.2 <commit>"
	# go-install builds may print e.g. "v2.4.2+unknown": match the prefix.
	v="$("$BIN/containerd" --version 2>/dev/null | awk '{print $3}')" || v=""
	if [ "${v%%+*}" = "$CONTAINERD_VERSION" ] || [ "${v%%+*}" = "${CONTAINERD_VERSION#v}" ]; then
		have_containerd=1
	fi
fi
if [ "$have_containerd" = 1 ]; then
	log "containerd $CONTAINERD_VERSION present in $BIN"
else
	need_go containerd
	log "building containerd $CONTAINERD_VERSION into $BIN (takes a few minutes)"
	GOBIN="$BIN" go install -tags 'no_btrfs no_devmapper no_zfs' \
		"github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
	"$BIN/containerd" --version
fi

# -------------------------------------------------------------- crictl ---
have_crictl=0
if [ -x "$BIN/crictl" ]; then
	if [ -f "$BIN/.crictl-version" ] && [ "$(cat "$BIN/.crictl-version")" = "$CRICTL_VERSION" ]; then
		have_crictl=1
	elif command -v go >/dev/null 2>&1 &&
		go version -m "$BIN/crictl" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+sigs.k8s.io/cri-tools[[:space:]]+$CRICTL_VERSION([[:space:]]|$)"; then
		echo "$CRICTL_VERSION" >"$BIN/.crictl-version"
		have_crictl=1
	fi
fi
if [ "$have_crictl" = 1 ]; then
	log "crictl $CRICTL_VERSION present in $BIN"
else
	need_go crictl
	log "building crictl $CRICTL_VERSION into $BIN"
	GOBIN="$BIN" go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
	echo "$CRICTL_VERSION" >"$BIN/.crictl-version"
fi

# --------------------------------------------------------- CNI plugins ---
CNI_BIN="$BIN/cni"
have_cni=1
for p in "${CNI_PLUGINS[@]}"; do
	[ -x "$CNI_BIN/${p#*/}" ] || have_cni=0
done
if [ "$have_cni" = 1 ] && [ "$(cat "$CNI_BIN/.version" 2>/dev/null)" != "$CNI_PLUGINS_VERSION" ]; then
	have_cni=0
fi
if [ "$have_cni" = 1 ]; then
	log "CNI plugins $CNI_PLUGINS_VERSION present in $CNI_BIN"
else
	need_go "the CNI plugins"
	log "building CNI plugins $CNI_PLUGINS_VERSION into $CNI_BIN"
	mkdir -p "$CNI_BIN"
	pkgs=()
	for p in "${CNI_PLUGINS[@]}"; do
		pkgs+=("github.com/containernetworking/plugins/plugins/$p@$CNI_PLUGINS_VERSION")
	done
	# static binaries, as the project's release ships them
	CGO_ENABLED=0 GOBIN="$CNI_BIN" go install -ldflags "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" "${pkgs[@]}"
	echo "$CNI_PLUGINS_VERSION" >"$CNI_BIN/.version"
fi

log "done; add to PATH: $BIN"
