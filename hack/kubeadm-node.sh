#!/usr/bin/env bash
# A node for the kubeadm init e2e test (test/e2e/kubeadm_test.go): on this
# machine, but apart from it, so kubeadm can write where it writes and its
# control plane listen where it listens.
#
#   hack/kubeadm-node.sh up DIR          set it up; prints `export` lines
#   hack/kubeadm-node.sh up DIR2 --join DIR
#                                        a second node, for kubeadm join:
#                                        the veth pair's other end (vb,
#                                        10.201.0.2) moves into its own
#                                        network namespace, so the two
#                                        nodes reach each other over it
#   hack/kubeadm-node.sh exec DIR CMD…   run CMD inside the node
#   hack/kubeadm-node.sh down DIR        take it all down (idempotent;
#                                        the second node first)
#
# The node is
# - a network namespace: lo, and a veth pair whose two ends stay inside it
#   (va 10.201.0.1/24, vb 10.201.0.2/24), the default route on va — the
#   non-loopback address kubeadm advertises the API server on; nothing
#   leaves the namespace;
# - a private mount namespace (held by a `sleep` this script starts) in
#   which /etc/kubernetes, /var/lib/kubelet, /var/lib/etcd, /var/lib/cni,
#   /var/log/pods, /var/log/containers and /usr/libexec/kubernetes are
#   directories under DIR (a mount point this script had to create on the
#   host is removed by down);
# - a rig of its own inside both (hack/rig.sh with
#   NODEAGENT_RIG_DIR=/var/lib/nodeagent-rig-kubeadm: registry on the
#   namespace's 127.0.0.1:5055, containerd 2.x, CNI bridge), with kubeadm's
#   control-plane images (hack/images/controlplane.sh) pushed to its
#   registry as 127.0.0.1:5055/k8s/<name>.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${NODEAGENT_RIG_CACHE:-/root/.cache/nodeagent-rig}"
K8S_VERSION="${RIG_K8S_VERSION:-v1.37.2}"
ETCD_TAG="${RIG_ETCD_VERSION:-v3.6.16}"
ETCD_TAG="${ETCD_TAG#v}-0"
NODE_RIG=/var/lib/nodeagent-rig-kubeadm
NETNS=nodeagent-kubeadm
NODE_IP=10.201.0.1
REPO=127.0.0.1:5055/k8s
BINDS=(/etc/kubernetes /var/lib/kubelet /var/lib/etcd /var/lib/cni /var/log/pods /var/log/containers /usr/libexec/kubernetes)

log() { echo "kubeadm-node: $*" >&2; }
die() { echo "kubeadm-node: ERROR: $*" >&2; exit 1; }

DIR="${2:-}"
[ -n "$DIR" ] && [ "${DIR#/}" != "$DIR" ] || die "usage: $0 up|exec|down /absolute/dir"
HOLDER_PID="$DIR/holder.pid"
CREATED="$DIR/created-mountpoints"
JOIN_OF=""
# a second node's names (written by up, read by exec and down)
second_node() {
	NETNS=nodeagent-kubeadm-2
	NODE_RIG=/var/lib/nodeagent-rig-kubeadm2
	NODE_IP=10.201.0.2
}
if [ "${1:-}" = up ] && [ "${3:-}" = --join ]; then
	JOIN_OF="${4:?--join DIR: the directory of the first node}"
	second_node
elif [ -f "$DIR/second-node" ]; then
	second_node
fi

# holder prints the pid of the process that holds the mount namespace.
holder() {
	local pid
	pid="$(cat "$HOLDER_PID" 2>/dev/null)" || return 1
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] &&
		tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "sleep" || return 1
	echo "$pid"
}

in_node() {
	local pid
	pid="$(holder)" || die "the node is not up ($DIR)"
	nsenter --target "$pid" --mount --net -- "$@"
}

cmd_up() {
	[ "$(id -u)" -eq 0 ] || die "must run as root"
	mkdir -p "$DIR"
	if holder >/dev/null; then
		die "a node is already up in $DIR (down it first)"
	fi
	if ip netns list | grep -qw "$NETNS"; then
		die "network namespace $NETNS exists: another kubeadm node is up (hack/kubeadm-node.sh down DIR)"
	fi
	log "network namespace $NETNS ($NODE_IP)"
	ip netns add "$NETNS"
	local ns=(nsenter "--net=/run/netns/$NETNS")
	"${ns[@]}" ip link set lo up
	if [ -n "$JOIN_OF" ]; then
		touch "$DIR/second-node"
		# vb leaves the first node for this one: the two are linked
		nsenter --net=/run/netns/nodeagent-kubeadm ip link set vb netns "$NETNS"
		"${ns[@]}" ip addr add "$NODE_IP/24" dev vb
		"${ns[@]}" ip link set vb up
		"${ns[@]}" ip route add default dev vb
	else
		"${ns[@]}" ip link add va type veth peer name vb
		"${ns[@]}" ip addr add "$NODE_IP/24" dev va
		"${ns[@]}" ip addr add 10.201.0.2/24 dev vb
		"${ns[@]}" ip link set va up
		"${ns[@]}" ip link set vb up
		"${ns[@]}" ip route add default dev va
	fi

	# the mount points the private namespace binds over
	: >"$CREATED"
	local p
	for p in "${BINDS[@]}"; do
		if [ ! -e "$p" ]; then
			mkdir -p "$p"
			echo "$p" >>"$CREATED"
		fi
	done
	log "mount namespace (holder: sleep)"
	setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$HOLDER_PID" \
		unshare --mount --propagation private -- \
		nsenter "--net=/run/netns/$NETNS" -- sleep infinity </dev/null >/dev/null 2>&1 &
	local i
	for ((i = 0; i < 50; i++)); do
		# unshare and nsenter exec: the pid becomes sleep's in its namespaces
		if holder >/dev/null && [ "$(readlink "/proc/$(holder)/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] &&
			[ "$(readlink "/proc/$(holder)/ns/net")" != "$(readlink /proc/self/ns/net)" ]; then
			break
		fi
		sleep 0.1
	done
	holder >/dev/null || die "the namespace holder did not start"
	for p in "${BINDS[@]}"; do
		local d="$DIR/fs${p//\//-}"
		mkdir -p "$d"
		in_node mount --bind "$d" "$p"
	done

	log "its rig in $NODE_RIG"
	in_node env NODEAGENT_RIG_DIR="$NODE_RIG" RIG_CONTAINERD=v2 bash "$HERE/rig.sh" up >"$DIR/rig.env"

	if [ -n "$JOIN_OF" ]; then
		cat <<EOF
export KUBEADM_NODE_PID='$(holder)'
export KUBEADM_NODE_IP='$NODE_IP'
export KUBEADM_CRI_SOCKET='unix://$NODE_RIG/containerd.sock'
EOF
		return 0
	fi
	log "control-plane images"
	bash "$HERE/images/controlplane.sh" "$CACHE/images/controlplane" "$CACHE/bin" "$K8S_VERSION" "$ETCD_TAG"
	printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$DIR/policy.json"
	local n ref
	for n in kube-apiserver kube-controller-manager kube-scheduler etcd; do
		ref="$K8S_VERSION"
		[ "$n" = etcd ] && ref="$ETCD_TAG"
		in_node skopeo --policy "$DIR/policy.json" --registries-conf /dev/null copy -q \
			--preserve-digests --dest-tls-verify=false \
			"oci:$CACHE/images/controlplane/$n:$ref" "docker://$REPO/$n:$ref" >&2
	done
	# the rig's pause image, as kubeadm names it (its preflight pulls it)
	local pause
	pause="$("$CACHE/bin/kubeadm" config images list --kubernetes-version "$K8S_VERSION" \
		--image-repository "$REPO" 2>/dev/null | grep '/pause:')" || die "kubeadm names no pause image"
	in_node skopeo --policy "$DIR/policy.json" --registries-conf /dev/null copy -q \
		--src-tls-verify=false --dest-tls-verify=false \
		"docker://127.0.0.1:5055/nodeagent/pause:3.10" "docker://$pause" >&2

	cat <<EOF
export KUBEADM_NODE_PID='$(holder)'
export KUBEADM_NODE_IP='$NODE_IP'
export KUBEADM_IMAGE_REPOSITORY='$REPO'
export KUBEADM_KUBERNETES_VERSION='$K8S_VERSION'
export KUBEADM_ETCD_TAG='$ETCD_TAG'
export KUBEADM_CRI_SOCKET='unix://$NODE_RIG/containerd.sock'
EOF
}

cmd_down() {
	local pid
	if pid="$(holder)"; then
		log "its rig down"
		nsenter --target "$pid" --mount --net -- env NODEAGENT_RIG_DIR="$NODE_RIG" bash "$HERE/rig.sh" down >&2 ||
			log "WARNING: the node's rig did not come down cleanly"
		kill "$pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 50; i++)); do
			[ -d "/proc/$pid" ] || break
			sleep 0.1
		done
	fi
	rm -f "$HOLDER_PID" "$DIR/second-node"
	if ip netns list | grep -qw "$NETNS"; then
		ip netns del "$NETNS" && log "network namespace $NETNS deleted"
	fi
	if [ -f "$CREATED" ]; then
		local p
		while IFS= read -r p; do
			[ -n "$p" ] && rmdir "$p" 2>/dev/null || true
		done < <(tac "$CREATED")
		rm -f "$CREATED"
	fi
}

case "${1:-}" in
up) cmd_up ;;
exec) shift 2; in_node "$@" ;;
down) cmd_down ;;
*) die "usage: $0 up|exec|down DIR" ;;
esac
