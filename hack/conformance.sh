#!/usr/bin/env bash
# `make conformance`: the upstream kubelet's own `[sig-node] [Conformance]`
# suite (k8s.io/kubernetes $K8S_VERSION test/e2e; 102 specs without
# [Serial]/[Disruptive]) against nodeagent, registered as the one node of a
# real control plane, on the rig's containerd 2.x. Not part of `make test`.
#
#  1. builds into $NODEAGENT_RIG_CACHE/bin, once (stamped): e2e.test, the ginkgo
#     CLI at the version k8s.io/kubernetes' go.mod names, agnhost, nnp
#     (nonewprivs) and kube-scheduler, in a scratch module beside the control
#     plane's (same staging replaces, same build cache); and bin/nodeagent from
#     the work tree;
#  2. brings the rig up (containerd 2.x) unless it is already up, in which case
#     it uses it and leaves it up; builds the stand-in images offline
#     (hack/conformance/images.sh) and pushes them to the rig's registry under
#     the names `e2e.test --list-images` gives with KUBE_TEST_REPO_LIST;
#  3. starts the control plane (hack/conformance/controlplane: etcd,
#     kube-apiserver, kube-controller-manager, kube-scheduler on 127.0.0.1)
#     and nodeagent as node $NODE (InternalIP 127.0.0.1, node server on :10250,
#     the cluster CA as client CA, client certificate by TLS bootstrap);
#  4. runs ginkgo, then prints
#       conformance: <passed> of <total> passed (kubelet 1.37.2 on the same rig: 98 of 102)
#     and the failed specs; exits 0 when the suite ran (whatever it found).
#
# It stops only what it started, by PID: nodeagent, the control plane helper
# (whose children die with it), the pods nodeagent created (found by their
# cgroup parent under --cgroup-root), and the rig if it brought it up.
# Everything of a run stays in $NODEAGENT_CONFORMANCE_DIR (default
# /var/lib/nodeagent-conformance): logs, report/ (JUnit and JSON), summary.txt.
#
# Knobs: CONFORMANCE_FOCUS, CONFORMANCE_SKIP, CONFORMANCE_PROCS (3),
#        NODEAGENT_RIG_CACHE, NODEAGENT_CONFORMANCE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"

K8S_VERSION="${RIG_K8S_VERSION:-v1.37.2}"
CACHE="${NODEAGENT_RIG_CACHE:-/root/.cache/nodeagent-rig}"
BIN="$CACHE/bin"
SCRATCH="$CACHE/src/conformance-$K8S_VERSION"
DIR="${NODEAGENT_CONFORMANCE_DIR:-/var/lib/nodeagent-conformance}"
NODE=nodeagent-conformance
CGROUP_ROOT=/nodeagent-conformance
FOCUS="${CONFORMANCE_FOCUS:-\[sig-node\].*\[Conformance\]}"
SKIP="${CONFORMANCE_SKIP:-\[Serial\]|\[Disruptive\]}"
PROCS="${CONFORMANCE_PROCS:-3}"
KUBELET_FIGURE="kubelet 1.37.2 on the same rig: 98 of 102"
export PATH="$BIN:/usr/local/go/bin:$PATH"

log() { echo "conformance: $*" >&2; }
die() { echo "conformance: ERROR: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (the rig, cgroups, mounts)"

# ------------------------------------------------------------- builds ---
stamp_ok() { [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1-version" 2>/dev/null)" = "$2" ]; }
LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"

# The scratch module: the control plane's go.mod/go.sum (hack/install-
# controlplane.sh: k8s.io/kubernetes with its staging replaces) plus the
# tools below, so every shared package is already in the build cache.
prepare_scratch() {
	local cp="$CACHE/src/kubernetes-$K8S_VERSION"
	[ -f "$cp/go.mod" ] || die "$cp/go.mod missing: run bash hack/install-controlplane.sh"
	mkdir -p "$SCRATCH"
	if [ -f "$SCRATCH/go.mod" ] && [ -f "$SCRATCH/tools.go" ] && grep -q "k8s.io/kubernetes $K8S_VERSION" "$SCRATCH/go.mod"; then
		return 0
	fi
	log "preparing scratch module $SCRATCH"
	cp "$cp/go.mod" "$cp/go.sum" "$SCRATCH/"
	(
		cd "$SCRATCH"
		go mod edit -module nodeagent-rig/conformance
		cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
GO
		go mod tidy >/dev/null 2>&1 || go mod tidy
	)
}

# build NAME STAMP CMD...: run CMD in the scratch module (it writes
# $BIN/NAME.tmp), install it and stamp it, unless already stamped.
build() {
	local name="$1" stamp="$2"
	shift 2
	stamp_ok "$name" "$stamp" && return 0
	log "building $name $stamp (minutes when cold)"
	(cd "$SCRATCH" && CGO_ENABLED=0 GOFLAGS=-mod=mod "$@")
	mv "$BIN/$name.tmp" "$BIN/$name"
	echo "$stamp" >"$BIN/.$name-version"
}

build_all() {
	prepare_scratch
	local ginkgo_v
	# the ginkgo k8s.io/kubernetes' go.mod names (MVS keeps it in the scratch module)
	ginkgo_v="$(cd "$SCRATCH" && go list -m -f '{{.Version}}' github.com/onsi/ginkgo/v2)"
	# one Go build at a time (2 cores, shared machine)
	build e2e.test "$K8S_VERSION" go test -c -trimpath -ldflags "$LDFLAGS" -o "$BIN/e2e.test.tmp" k8s.io/kubernetes/test/e2e
	build ginkgo "$ginkgo_v" go build -trimpath -o "$BIN/ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo
	build kube-scheduler "$K8S_VERSION" go build -trimpath -ldflags "$LDFLAGS" -o "$BIN/kube-scheduler.tmp" k8s.io/kubernetes/cmd/kube-scheduler
	build agnhost "$K8S_VERSION" go build -trimpath -ldflags "-s -w" -o "$BIN/agnhost.tmp" k8s.io/kubernetes/test/images/agnhost
	build nnp "$K8S_VERSION" go build -trimpath -ldflags "-s -w" -o "$BIN/nnp.tmp" k8s.io/kubernetes/test/images/nonewprivs
	log "building bin/nodeagent and the control plane helper from the work tree"
	bash hack/build.sh bin/nodeagent
	go build -o "$DIR/controlplane" ./hack/conformance/controlplane
}

# -------------------------------------------------------------- state ---
STARTED_RIG=0
CP_HELPER_PID=""
AGENT_PID=""

# alive PID PATTERN: PID runs and its command line contains PATTERN.
alive() {
	[ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"
}

# stop_pid PID PATTERN NAME SECONDS: SIGTERM, wait, SIGKILL — only if PID is
# still the process we started (its command line contains PATTERN).
stop_pid() {
	local pid="$1" pat="$2" name="$3" secs="$4" i
	alive "$pid" "$pat" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		alive "$pid" "$pat" || { log "$name (pid $pid) stopped"; return 0; }
		sleep 0.1
	done
	log "$name (pid $pid) did not stop in ${secs}s: SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
}

crictl_rig() { timeout 60 crictl --runtime-endpoint "$CONTAINER_RUNTIME_ENDPOINT" --image-endpoint "$CONTAINER_RUNTIME_ENDPOINT" "$@"; }

# our_sandboxes: the rig's sandboxes whose cgroup parent is under our
# --cgroup-root (nodeagent's pods; other agents on the rig use other roots).
our_sandboxes() {
	local id parent
	for id in $(crictl_rig pods -q 2>/dev/null); do
		parent="$(crictl_rig inspectp -o go-template --template '{{.info.config.linux.cgroup_parent}}' "$id" 2>/dev/null)" || continue
		case "$parent" in "$CGROUP_ROOT"/*) echo "$id" ;; esac
	done
}

remove_our_pods() {
	[ -n "${CONTAINER_RUNTIME_ENDPOINT:-}" ] || return 0
	local ids
	ids="$(our_sandboxes | tr '\n' ' ')"
	if [ -n "${ids// /}" ]; then
		log "removing the sandboxes nodeagent left: $ids"
		# shellcheck disable=SC2086
		crictl_rig stopp $ids >/dev/null 2>&1 || true
		# shellcheck disable=SC2086
		crictl_rig rmp -f $ids >/dev/null 2>&1 || true
	fi
	# empty cgroups of our root, deepest first (v1 controllers and v2)
	find /sys/fs/cgroup -depth -type d -path "*$CGROUP_ROOT*" -exec rmdir {} + 2>/dev/null || true
}

# unmount_dir: mounts under $DIR (tmpfs volumes of pods), deepest first.
unmount_dir() {
	local mp
	awk -v d="$DIR/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | awk '{ print gsub("/", "/"), $0 }' |
		sort -rn | cut -d' ' -f2- | while IFS= read -r mp; do umount -l "$mp" 2>/dev/null || true; done
}

cleanup() {
	local rc=$?
	set +e
	if alive "$AGENT_PID" "$REPO/bin/nodeagent"; then
		# pods of the suite's namespaces first, while the agent can stop them
		if [ -n "${CP_ADMIN_KUBECONFIG:-}" ]; then
			kubectl --kubeconfig "$CP_ADMIN_KUBECONFIG" delete pods --all -A --wait=false >/dev/null 2>&1
			for _ in $(seq 1 30); do
				[ -z "$(our_sandboxes)" ] && break
				sleep 2
			done
		fi
		stop_pid "$AGENT_PID" "$REPO/bin/nodeagent" nodeagent 30
	fi
	remove_our_pods
	stop_pid "$CP_HELPER_PID" "$DIR/controlplane" "control plane" 60
	unmount_dir
	if [ "$STARTED_RIG" = 1 ]; then
		log "bringing down the rig this run brought up"
		bash hack/rig.sh down >&2
	fi
	exit "$rc"
}

# ---------------------------------------------------------------- run ---
mkdir -p "$DIR"
# A run that died without its trap left pids: stop them if they are still ours.
for f in agent controlplane; do
	pid="$(cat "$DIR/$f.pid" 2>/dev/null || true)"
	case "$f" in agent) pat="$REPO/bin/nodeagent" ;; *) pat="$DIR/controlplane" ;; esac
	if alive "$pid" "$pat"; then
		log "stopping $f (pid $pid) left by an earlier run"
		stop_pid "$pid" "$pat" "$f" 60
	fi
done

build_all

trap cleanup EXIT INT TERM

# The rig: use it when it is up (another run may be using it), else bring it up.
RIG_DIR="${NODEAGENT_RIG_DIR:-/var/lib/nodeagent-rig}"
if bash hack/rig.sh status >/dev/null 2>&1; then
	[ "$(cat "$RIG_DIR/variant" 2>/dev/null)" = v2 ] ||
		die "the rig is up with RIG_CONTAINERD=$(cat "$RIG_DIR/variant" 2>/dev/null); the suite needs containerd 2.x (v2)"
	log "the rig is already up: using it, leaving it up"
	eval "$(bash hack/rig.sh env)"
else
	STARTED_RIG=1
	eval "$(RIG_CONTAINERD=v2 bash hack/rig.sh up)"
fi
# only now: cleanup may remove our pods from the rig's containerd
remove_our_pods
unmount_dir
# the previous run's logs and report stay as run.prev
rm -rf "$DIR/run.prev"
[ ! -d "$DIR/run" ] || mv "$DIR/run" "$DIR/run.prev"
mkdir -p "$DIR/run" "$DIR/images"
RUN="$DIR/run"

# Images: every registry the suite names mapped to the rig's registry.
REG="$NODEAGENT_REGISTRY"
cat >"$RUN/repo-list.yaml" <<YAML
promoterE2eRegistry: $REG/e2e-test-images
buildImageRegistry: $REG/build-image
invalidRegistry: $REG/invalid
gcEtcdRegistry: $REG/gc-etcd
gcRegistry: $REG/gc
sigStorageRegistry: $REG/sig-storage
privateRegistry: $REG/private
dockerLibraryRegistry: $REG/library
cloudProviderGcpRegistry: $REG/cloud-provider-gcp
YAML
export KUBE_TEST_REPO_LIST="$RUN/repo-list.yaml"
"$BIN/e2e.test" --list-images >"$RUN/images.txt"
K8S_SRC="$(cd "$SCRATCH" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)" \
	bash hack/conformance/images.sh "$DIR/images" "$RUN/images.txt" "$BIN"

# Control plane.
log "starting the control plane (log $RUN/controlplane.log)"
setsid "$DIR/controlplane" -dir "$RUN/cluster" -bin "$BIN" -env "$RUN/cluster.env" \
	</dev/null >"$RUN/controlplane.log" 2>&1 &
CP_HELPER_PID=$!
echo "$CP_HELPER_PID" >"$DIR/controlplane.pid"
for _ in $(seq 1 900); do
	[ -s "$RUN/cluster.env" ] && break
	# kill -0, not alive: right after the fork the child may not have
	# exec'd yet (its command line is still this script's).
	kill -0 "$CP_HELPER_PID" 2>/dev/null || { tail -n 40 "$RUN/controlplane.log" >&2; die "the control plane did not start"; }
	sleep 0.2
done
[ -s "$RUN/cluster.env" ] || die "the control plane was not up within 3 minutes; see $RUN/controlplane.log"
# shellcheck disable=SC1091
. "$RUN/cluster.env"
KC=(kubectl --kubeconfig "$CP_ADMIN_KUBECONFIG")

# nodeagent, the one node.
log "starting nodeagent as node $NODE (log $RUN/nodeagent.log)"
mkdir -p "$RUN/agent/manifests"
setsid "$REPO/bin/nodeagent" \
	--kubeconfig "$RUN/agent/kubeconfig" \
	--bootstrap-kubeconfig "$CP_BOOTSTRAP_KUBECONFIG" \
	--cert-dir "$RUN/agent/pki" \
	--root-dir "$RUN/agent/root" \
	--pod-logs-dir "$RUN/agent/pod-logs" \
	--manifest-dir "$RUN/agent/manifests" \
	--container-runtime-endpoint "$CONTAINER_RUNTIME_ENDPOINT" \
	--cni-conf-dir "$NODEAGENT_CNI_CONF_DIR" --cni-bin-dir "$NODEAGENT_CNI_BIN_DIR" \
	--hostname-override "$NODE" \
	--node-ip 127.0.0.1 \
	--port 10250 \
	--client-ca-file "$CP_CA_FILE" \
	--cgroup-root "$CGROUP_ROOT" \
	--healthz-port 0 \
	</dev/null >"$RUN/nodeagent.log" 2>&1 &
AGENT_PID=$!
echo "$AGENT_PID" >"$DIR/agent.pid"
ready=0
for _ in $(seq 1 120); do
	kill -0 "$AGENT_PID" 2>/dev/null || { tail -n 40 "$RUN/nodeagent.log" >&2; die "nodeagent exited"; }
	if [ "$("${KC[@]}" get node "$NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; then
		ready=1
		break
	fi
	sleep 1
done
[ "$ready" = 1 ] || { tail -n 40 "$RUN/nodeagent.log" >&2; die "node $NODE not Ready within 2 minutes"; }
log "node $NODE Ready: $("${KC[@]}" get node "$NODE" -o jsonpath='{.status.addresses}')"

# The suite.
mkdir -p "$RUN/report"
log "running ginkgo (-p --procs=$PROCS; ~15 min): log $RUN/ginkgo.log"
set +e
(cd "$RUN" && ginkgo -p --procs="$PROCS" --focus="$FOCUS" --skip="$SKIP" --no-color \
	--json-report=report.json --output-dir="$RUN/report" --timeout=2h \
	"$BIN/e2e.test" -- \
	--kubeconfig="$CP_ADMIN_KUBECONFIG" --provider=skeleton --num-nodes=1 \
	--allowed-not-ready-nodes=0 --minStartupPods=0 --node-os-distro=debian \
	--container-runtime-endpoint="$CONTAINER_RUNTIME_ENDPOINT" \
	--report-dir="$RUN/report") >"$RUN/ginkgo.log" 2>&1
ginkgo_rc=$?
set -e
log "ginkgo exited $ginkgo_rc"

# Summary: specs that ran (It nodes not skipped) and their states.
J="$RUN/report/report.json"
[ -s "$J" ] || { tail -n 60 "$RUN/ginkgo.log" >&2; die "no JSON report ($J): the suite did not run"; }
specs='[.[].SpecReports[]? | select(.LeafNodeType == "It" and .State != "skipped" and .State != "pending")]'
total="$(jq "$specs | length" "$J")"
passed="$(jq "$specs | map(select(.State == \"passed\")) | length" "$J")"
{
	echo "conformance: $passed of $total passed ($KUBELET_FIGURE)"
	jq -r "$specs | map(select(.State != \"passed\"))[] |
		\"  FAILED (\" + .State + \"): \" + ((.ContainerHierarchyTexts + [.LeafNodeText]) | join(\" \")) +
		\"\n    \" + ((.Failure.Message // \"\") | split(\"\n\") | map(select(test(\"\\\\S\"))) |
			(map(select(test(\"mismatch|[Tt]imed out|^expected \\\"\"))) as \$key | if (\$key | length) > 0 then \$key else . end) |
			.[0:3] | map(sub(\"^\\\\s+\"; \"\")) | join(\" | \"))" "$J"
	echo "  (date $(date -u +%Y-%m-%dT%H:%MZ); report $RUN/report, logs $RUN)"
} | tee "$RUN/summary.txt"
