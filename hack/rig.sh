#!/usr/bin/env bash
# nodeagent end-to-end test rig: a private containerd (CRI) + CNI bridge +
# local OCI registry with offline-built test images. See hack/rig/README.md.
#
#   hack/rig.sh up       start (idempotent); prints `export` lines on stdout
#   hack/rig.sh env      print the `export` lines (works whether up or not)
#   hack/rig.sh status   show what is running
#   hack/rig.sh kill-containerd / start-containerd
#                        SIGKILL containerd as a crash would, and start it
#                        again on the same state (runtime-outage tests)
#   hack/rig.sh down [--purge]
#                        stop everything `up` started; --purge also deletes
#                        the rig dir (registry storage, built images, logs)
#
# Knobs: NODEAGENT_RIG_DIR (default /var/lib/nodeagent-rig),
#        RIG_CONTAINERD=v2|debian (default v2), NODEAGENT_POD_CIDR
#        (default 10.99.0.0/24), NODEAGENT_RIG_CACHE (default
#        /root/.cache/nodeagent-rig, binaries in its bin/).
#
# Progress goes to stderr, so `eval "$(hack/rig.sh up)"` works.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RIG="${NODEAGENT_RIG_DIR:-/var/lib/nodeagent-rig}"
RIG="${RIG%/}"
CACHE="${NODEAGENT_RIG_CACHE:-/root/.cache/nodeagent-rig}"
CBIN="$CACHE/bin"
VARIANT="${RIG_CONTAINERD:-v2}"
REG_HOST=127.0.0.1
REG_PORT=5055
REG="$REG_HOST:$REG_PORT"
POD_CIDR="${NODEAGENT_POD_CIDR:-10.99.0.0/24}"
BRIDGE=nabr0
CNI_NET=nodeagent
PAUSE_IMAGE="$REG/nodeagent/pause:3.10"
BUSYBOX_IMAGE="$REG/nodeagent/busybox:1.36"
BUSYBOX_LATEST="$REG/nodeagent/busybox:latest"
RUNC=/usr/sbin/runc

SOCK="$RIG/containerd.sock"
CTRD_PID="$RIG/containerd.pid"
CTRD_LOG="$RIG/containerd.log"
CTRD_CONF="$RIG/containerd.toml"
REG_PIDF="$RIG/registry.pid"
REG_LOG="$RIG/registry.log"
REG_CONF="$RIG/registry.yml"
REG_DATA="$RIG/registry"
IMG_DIR="$RIG/images"
CERTS_D="$RIG/certs.d"
CNI_CONF_DIR="$RIG/cni/net.d"
CNI_BIN_DIR="$RIG/cni/bin"
CNI_IPAM_DIR="$RIG/cni/ipam"
CTRD_ROOT="$RIG/root"
CTRD_STATE="$RIG/state"
SHIM_SOCK_DIR="$RIG/s"

# PATH for our own tool calls (crictl etc.).
export PATH="$CBIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}"

log() { echo "rig: $*" >&2; }
die() { echo "rig: ERROR: $*" >&2; exit 1; }

case "$RIG" in
/?*) ;;
*) die "NODEAGENT_RIG_DIR must be an absolute path other than / (got '$RIG')" ;;
esac

crictl_rig() {
	[ -f "$RIG/crictl.yaml" ] || write_crictl_yaml
	timeout "${CRICTL_TIMEOUT:-60}" crictl --config "$RIG/crictl.yaml" \
		--runtime-endpoint "unix://$SOCK" --image-endpoint "unix://$SOCK" "$@"
}

# pid_of PIDFILE PATTERN: print the pid if alive and its cmdline contains PATTERN.
pid_of() {
	local f="$1" pat="$2" pid
	[ -s "$f" ] || return 1
	pid="$(cat "$f" 2>/dev/null)" || return 1
	case "$pid" in '' | *[!0-9]*) return 1 ;; esac
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$pat" || return 1
	echo "$pid"
}
containerd_pid() { pid_of "$CTRD_PID" "$CTRD_CONF"; }
registry_pid() { pid_of "$REG_PIDF" "$REG_CONF"; }

# stop_pid PID NAME [SECONDS]: SIGTERM, wait, then SIGKILL.
stop_pid() {
	local pid="$1" name="$2" secs="${3:-15}" i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		[ -d "/proc/$pid" ] || { log "$name (pid $pid) stopped"; return 0; }
		# a zombie has an empty cmdline
		[ -s "/proc/$pid/cmdline" ] || { log "$name (pid $pid) stopped"; return 0; }
		sleep 0.1
	done
	log "$name (pid $pid) did not stop after ${secs}s, sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	sleep 0.2
}

containerd_bin() {
	case "$VARIANT" in
	v2) echo "$CBIN/containerd" ;;
	debian) echo /usr/bin/containerd ;;
	*) die "RIG_CONTAINERD must be v2 or debian (got '$VARIANT')" ;;
	esac
}

# The CNI plugins the rig's network uses: current ones built by
# hack/install-deps.sh for the default variant (CNI 1.1: STATUS, GC),
# Debian's older ones (CNI 1.0) for RIG_CONTAINERD=debian, the fallback an
# operator may have.
CNI_PLUGINS="bridge host-local loopback portmap bandwidth"
cni_plugin_dir() {
	case "$VARIANT" in
	debian) echo /usr/lib/cni ;;
	*) echo "$CBIN/cni" ;;
	esac
}
cni_version() {
	case "$VARIANT" in
	debian) echo 1.0.0 ;;
	*) echo 1.1.0 ;;
	esac
}

check_deps() {
	local b missing=()
	for b in "$(containerd_bin)" "$CBIN/crictl" "$RUNC" /usr/bin/docker-registry /usr/bin/skopeo \
		/bin/busybox gcc curl ip iptables; do
		command -v "$b" >/dev/null 2>&1 || missing+=("$b")
	done
	for b in $CNI_PLUGINS; do
		[ -x "$(cni_plugin_dir)/$b" ] || missing+=("$(cni_plugin_dir)/$b")
	done
	if [ "$VARIANT" = v2 ]; then
		[ -x "$CBIN/containerd-shim-runc-v2" ] || missing+=("$CBIN/containerd-shim-runc-v2")
	else
		[ -x /usr/bin/containerd-shim-runc-v2 ] || missing+=(/usr/bin/containerd-shim-runc-v2)
	fi
	[ "${#missing[@]}" -eq 0 ] || die "missing: ${missing[*]} -- run: bash hack/install-deps.sh"
	[ "$(id -u)" -eq 0 ] || die "must run as root"
}

# ------------------------------------------------------------------ env ---
env_lines() {
	local v="$VARIANT"
	# report the variant that is actually running, if any
	containerd_pid >/dev/null && [ -s "$RIG/variant" ] && v="$(cat "$RIG/variant")"
	cat <<EOF
export NODEAGENT_RIG_DIR='$RIG'
export NODEAGENT_RIG_CONTAINERD='$v'
export NODEAGENT_CONTAINERD_ADDRESS='unix://$SOCK'
export NODEAGENT_REGISTRY='$REG'
export NODEAGENT_PAUSE_IMAGE='$PAUSE_IMAGE'
export NODEAGENT_BUSYBOX_IMAGE='$BUSYBOX_IMAGE'
export NODEAGENT_CNI_CONF_DIR='$CNI_CONF_DIR'
export NODEAGENT_CNI_BIN_DIR='$CNI_BIN_DIR'
export NODEAGENT_POD_CIDR='$POD_CIDR'
export CONTAINER_RUNTIME_ENDPOINT='unix://$SOCK'
export IMAGE_SERVICE_ENDPOINT='unix://$SOCK'
export CRI_CONFIG_FILE='$RIG/crictl.yaml'
export PATH="$CBIN:\$PATH"
EOF
}

write_crictl_yaml() {
	cat >"$RIG/crictl.yaml" <<EOF
runtime-endpoint: unix://$SOCK
image-endpoint: unix://$SOCK
timeout: 10
EOF
}

# ------------------------------------------------------------- registry ---
write_registry_config() {
	mkdir -p "$REG_DATA"
	cat >"$REG_CONF" <<EOF
# generated by hack/rig.sh
version: 0.1
log:
  level: info
  accesslog:
    disabled: true
  fields:
    service: nodeagent-rig-registry
storage:
  filesystem:
    rootdirectory: $REG_DATA
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: $REG
  headers:
    X-Content-Type-Options: [nosniff]
EOF
}

registry_answers() { curl -fsS -o /dev/null --max-time 2 "http://$REG/v2/" 2>/dev/null; }

start_registry() {
	local pid
	if pid="$(registry_pid)"; then
		log "registry already running (pid $pid)"
		return 0
	fi
	if registry_answers; then
		die "something else already serves http://$REG/ (not our pidfile $REG_PIDF); stop it first"
	fi
	write_registry_config
	log "starting registry on $REG (storage $REG_DATA, log $REG_LOG)"
	echo "=== $(date -Is) starting docker-registry" >>"$REG_LOG"
	# Clear REGISTRY_* so nothing in the environment overrides our config.
	setsid bash -c 'echo $$ >"$1"; shift; exec env -u REGISTRY_HTTP_ADDR -u REGISTRY_STORAGE "$@"' _ \
		"$REG_PIDF" /usr/bin/docker-registry serve "$REG_CONF" \
		</dev/null >>"$REG_LOG" 2>&1 9>&- &
	local i
	for ((i = 0; i < 150; i++)); do
		registry_answers && { log "registry up (pid $(cat "$REG_PIDF"))"; return 0; }
		if [ $i -gt 5 ] && ! registry_pid >/dev/null; then
			tail -n 20 "$REG_LOG" >&2
			die "registry exited; see $REG_LOG"
		fi
		sleep 0.1
	done
	tail -n 20 "$REG_LOG" >&2
	die "registry did not answer on http://$REG/v2/ within 15s"
}

# --------------------------------------------------------------- images ---
images_want() {
	cat "$HERE/images/build.sh" "$HERE/images/layout.sh" "$HERE/images/pause.c" /bin/busybox | sha256sum | cut -d' ' -f1
}

images_in_registry() {
	local ref
	for ref in pause/manifests/3.10 busybox/manifests/1.36 busybox/manifests/latest; do
		curl -fsS -o /dev/null -I --max-time 5 \
			-H 'Accept: application/vnd.oci.image.manifest.v1+json' \
			-H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
			"http://$REG/v2/nodeagent/$ref" 2>/dev/null || return 1
	done
}

ensure_images() {
	local want
	want="$(images_want)"
	if [ "$(cat "$IMG_DIR/stamp" 2>/dev/null)" = "$want" ] && images_in_registry; then
		log "test images already in registry"
		return 0
	fi
	log "building test images (OCI layouts in $IMG_DIR)"
	rm -f "$IMG_DIR/stamp"
	mkdir -p "$IMG_DIR"
	bash "$HERE/images/build.sh" "$IMG_DIR" >&2
	printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$IMG_DIR/policy.json"
	local sk=(skopeo --policy "$IMG_DIR/policy.json" --registries-conf /dev/null copy -q
		--preserve-digests --dest-tls-verify=false)
	log "pushing $PAUSE_IMAGE"
	"${sk[@]}" "oci:$IMG_DIR/pause:3.10" "docker://$PAUSE_IMAGE" >&2
	log "pushing $BUSYBOX_IMAGE and $BUSYBOX_LATEST"
	"${sk[@]}" "oci:$IMG_DIR/busybox:1.36" "docker://$BUSYBOX_IMAGE" >&2
	"${sk[@]}" "oci:$IMG_DIR/busybox:1.36" "docker://$BUSYBOX_LATEST" >&2
	images_in_registry || die "images pushed but not visible in registry"
	echo "$want" >"$IMG_DIR/stamp"
}

# ------------------------------------------------------------------ CNI ---
write_cni() {
	mkdir -p "$CNI_CONF_DIR" "$CNI_BIN_DIR" "$CNI_IPAM_DIR"
	# Only the plugins the network names, from the variant's plugin dir:
	# links left by the other variant go first.
	find "$CNI_BIN_DIR" -maxdepth 1 -type l -delete
	local p
	for p in $CNI_PLUGINS; do
		ln -sfn "$(cni_plugin_dir)/$p" "$CNI_BIN_DIR/$p"
	done
	# The shape nodeagent generates for --pod-cidr (internal/cni), but
	# without ipMasq: the rig's traffic stays on its bridge. The rig owns
	# this file (it has no nodeagent marker): the e2e agents share one
	# containerd, pass --cni-conf-dir and leave it alone.
	cat >"$CNI_CONF_DIR/10-nodeagent.conflist.tmp" <<EOF
{
  "cniVersion": "$(cni_version)",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "macspoofchk": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$CNI_IPAM_DIR"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}
  ]
}
EOF
	mv "$CNI_CONF_DIR/10-nodeagent.conflist.tmp" "$CNI_CONF_DIR/10-nodeagent.conflist"
}

# ----------------------------------------------------------- containerd ---
write_hosts_toml() {
	mkdir -p "$CERTS_D/$REG"
	cat >"$CERTS_D/$REG/hosts.toml" <<EOF
# generated by hack/rig.sh: pull $REG over plain HTTP
server = "http://$REG"

[host."http://$REG"]
  capabilities = ["pull", "resolve", "push"]
  skip_verify = true
EOF
}

write_containerd_config_v2() {
	# containerd 2.4 natively writes `version = 4`; version 3 is still
	# accepted (it logs "Configuration migrated from version 3") and also
	# works with containerd 2.0-2.3.
	local shim_dir_line=""
	# the shim manager rejects socket_dir longer than 42 chars (linux)
	[ "${#SHIM_SOCK_DIR}" -le 42 ] && shim_dir_line="socket_dir = '$SHIM_SOCK_DIR'"
	cat >"$CTRD_CONF" <<EOF
# generated by hack/rig.sh (RIG_CONTAINERD=v2, containerd 2.x)
version = 3
root = '$CTRD_ROOT'
state = '$CTRD_STATE'
temp = '$RIG/tmp'
# do not pick up /etc/containerd/conf.d/*.toml (2.x default imports)
imports = []
oom_score = 0
disabled_plugins = []

[grpc]
  address = '$SOCK'

[ttrpc]
  address = '$SOCK.ttrpc'

[debug]
  level = 'info'

[metrics]
  address = ''

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '$PAUSE_IMAGE'
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '$CERTS_D'

  [plugins.'io.containerd.cri.v1.runtime']
    # root without CAP_SYS_RESOURCE: otherwise runc fails with
    # "can't get final child's PID from pipe: EOF"
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = []
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '$RUNC'
          Root = '$CTRD_STATE/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['$CNI_BIN_DIR']
      conf_dir = '$CNI_CONF_DIR'
      max_conf_num = 1

  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.transfer.v1.local']
    config_path = '$CERTS_D'

  [plugins.'io.containerd.internal.v1.opt']
    path = '$RIG/opt'

  [plugins.'io.containerd.image-verifier.v1.bindir']
    bin_dir = '$RIG/opt/image-verifier/bin'

  [plugins.'io.containerd.nri.v1.nri']
    disable = true

  [plugins.'io.containerd.shim.v1.manager']
    $shim_dir_line
EOF
}

write_containerd_config_debian() {
	cat >"$CTRD_CONF" <<EOF
# generated by hack/rig.sh (RIG_CONTAINERD=debian, containerd 1.6)
version = 2
root = "$CTRD_ROOT"
state = "$CTRD_STATE"
temp = "$RIG/tmp"
imports = []
oom_score = 0
plugin_dir = ""
disabled_plugins = []

[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "$PAUSE_IMAGE"
    # root without CAP_SYS_RESOURCE: otherwise runc fails with
    # "can't get final child's PID from pipe: EOF"
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          BinaryName = "$RUNC"
          Root = "$CTRD_STATE/runc"
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "$CNI_BIN_DIR"
      conf_dir = "$CNI_CONF_DIR"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "$CERTS_D"

  [plugins."io.containerd.internal.v1.opt"]
    path = "$RIG/opt"
EOF
}

cri_ready() {
	local out
	out="$(CRICTL_TIMEOUT=5 crictl_rig info -o go-template \
		--template '{{range .status.conditions}}{{.type}}={{.status}} {{end}}' 2>/dev/null)" || return 1
	case "$out" in *RuntimeReady=true*) ;; *) return 1 ;; esac
	case "$out" in *NetworkReady=true*) ;; *) return 1 ;; esac
}

start_containerd() {
	local pid
	if pid="$(containerd_pid)"; then
		local running
		running="$(cat "$RIG/variant" 2>/dev/null || echo '?')"
		[ "$running" = "$VARIANT" ] ||
			die "rig containerd is already up with RIG_CONTAINERD=$running (pid $pid); run 'hack/rig.sh down' first"
		log "containerd already running (pid $pid)"
	else
		# Whatever a dead containerd left behind (crash, reboot): clean it so
		# every start is fresh (empty content store, no stale sandboxes) —
		# unless this is a restart that must find its containers again.
		[ "${1:-}" = keep ] || cleanup_containerd_leftovers
		mkdir -p "$CTRD_ROOT" "$CTRD_STATE" "$RIG/tmp" "$RIG/opt"
		[ "${#SHIM_SOCK_DIR}" -le 42 ] && mkdir -p "$SHIM_SOCK_DIR" && chmod 0711 "$SHIM_SOCK_DIR"
		write_hosts_toml
		write_cni
		"write_containerd_config_$VARIANT"
		# bridge plugin (isGateway) turns on net.ipv4.ip_forward; remember
		# the original value so down can restore it.
		[ -f "$RIG/ip_forward.orig" ] || cat /proc/sys/net/ipv4/ip_forward >"$RIG/ip_forward.orig"

		local bin path
		bin="$(containerd_bin)"
		if [ "$VARIANT" = v2 ]; then
			path="$CBIN:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		else
			# no cache bin dir: Debian's containerd must find Debian's shim
			path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		fi
		log "starting containerd ($VARIANT: $("$bin" --version)), log $CTRD_LOG"
		echo "=== $(date -Is) starting $bin ($VARIANT)" >>"$CTRD_LOG"
		echo "$VARIANT" >"$RIG/variant"
		setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$CTRD_PID" \
			env -i PATH="$path" HOME=/root LANG=C.UTF-8 TMPDIR="$RIG/tmp" \
			"$bin" --config "$CTRD_CONF" \
			</dev/null >>"$CTRD_LOG" 2>&1 9>&- &
	fi

	local i
	for ((i = 0; i < 600; i++)); do
		if cri_ready; then
			log "containerd CRI ready (pid $(cat "$CTRD_PID"), RuntimeReady and NetworkReady)"
			return 0
		fi
		if [ $i -gt 10 ] && ! containerd_pid >/dev/null; then
			tail -n 30 "$CTRD_LOG" >&2
			die "containerd exited; see $CTRD_LOG"
		fi
		sleep 0.1
	done
	tail -n 30 "$CTRD_LOG" >&2
	crictl_rig info >&2 || true
	die "containerd CRI not ready within 60s; see $CTRD_LOG"
}

# ------------------------------------------------------------- cleanup ---

# pids whose argv[0] is a containerd shim and whose command line mentions the rig.
rig_shim_pids() {
	local d pid cmd
	for d in /proc/[0-9]*; do
		pid="${d#/proc/}"
		cmd="$(tr '\0' ' ' 2>/dev/null <"$d/cmdline")" || continue
		case "$cmd" in
		*containerd-shim*"$RIG/"*) echo "$pid" ;;
		esac
	done
}

# ids of containers/sandboxes this rig's containerd (may have) started: task
# bundle dirs and runc state dirs under the rig's state dir.
rig_container_ids() {
	local d
	for d in "$CTRD_STATE"/io.containerd.runtime.v2.task/*/* "$CTRD_STATE"/runc/*/*; do
		[ -d "$d" ] && basename "$d"
	done | sort -u
}

# pids of processes inside a cgroup named after one of the rig's container ids.
# (/proc/PID/root is useless here: in the container's mount namespace it
# reads as "/".)
rig_container_pids() {
	local ids d pid
	ids="$(rig_container_ids)"
	[ -n "$ids" ] || return 0
	for d in /proc/[0-9]*; do
		pid="${d#/proc/}"
		[ "$pid" = "$$" ] && continue
		# cgroup lines are "N:controllers:/path"; match a path whose last
		# element is one of our ids
		awk -F: '{ n = split($3, a, "/"); print a[n] }' "$d/cgroup" 2>/dev/null |
			grep -qxF -e "$ids" && echo "$pid"
	done
	return 0
}

# mount points under the rig dir, deepest first.
rig_mounts() {
	local mp
	while read -r _ mp _; do
		mp="$(printf '%b' "${mp//\\/\\0}")"
		case "$mp" in
		"$RIG"/*) echo "$mp" ;;
		esac
	done </proc/self/mounts | awk '{ print gsub("/", "/"), $0 }' | sort -rn -k1,1 | cut -d' ' -f2- | uniq
}

unmount_rig() {
	local mp n=0
	for _ in 1 2 3; do
		local any=0
		while IFS= read -r mp; do
			[ -n "$mp" ] || continue
			any=1
			umount -l "$mp" 2>/dev/null && n=$((n + 1)) || true
		done < <(rig_mounts)
		[ $any = 1 ] || break
	done
	[ $n -eq 0 ] || log "unmounted $n mount(s) under $RIG"
	if [ -n "$(rig_mounts)" ]; then
		log "WARNING: mounts still present under $RIG:"
		rig_mounts >&2
		return 1
	fi
}

kill_rig_leftovers() {
	local pids nsdir id cg
	# 1. containers runc still knows about (rig's private runc root)
	for nsdir in "$CTRD_STATE"/runc/*; do
		[ -d "$nsdir" ] || continue
		for id in "$nsdir"/*; do
			[ -f "$id/state.json" ] || continue
			id="$(basename "$id")"
			log "runc delete --force $id"
			"$RUNC" --root "$nsdir" delete --force "$id" >/dev/null 2>&1 || true
		done
	done
	# 2. shims
	pids="$(rig_shim_pids | tr '\n' ' ')"
	if [ -n "${pids// /}" ]; then
		log "killing leftover rig shims: $pids"
		# their listening sockets (containerd 1.6 puts them in /run/containerd/s)
		local socks="" pid
		for pid in $pids; do
			socks+=" $(ss -xlpn 2>/dev/null | awk -v p="pid=$pid," 'index($0, p) { print $5 }' | tr '\n' ' ')"
		done
		# shellcheck disable=SC2086
		kill -TERM $pids 2>/dev/null || true
		sleep 1
		# shellcheck disable=SC2046
		kill -KILL $(rig_shim_pids) 2>/dev/null || true
		for pid in $socks; do
			case "$pid" in /run/containerd/s/* | "$SHIM_SOCK_DIR"/*) rm -f "$pid" ;; esac
		done
	fi
	# 3. anything still running in a cgroup of one of our containers
	pids="$(rig_container_pids | tr '\n' ' ')"
	if [ -n "${pids// /}" ]; then
		log "killing leftover container processes: $pids"
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.5
	fi
	# 4. their now-empty cgroups (cgroup v1 controllers and v2)
	for id in $(rig_container_ids); do
		for cg in /sys/fs/cgroup/*/*/"$id" /sys/fs/cgroup/*/"$id" /sys/fs/cgroup/*/*/*/"$id"; do
			[ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true
		done
	done
}

cleanup_containerd_leftovers() {
	kill_rig_leftovers
	local ok=1
	unmount_rig || ok=0
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link del "$BRIDGE" && log "deleted bridge $BRIDGE"
	fi
	# libcni's result cache is not configurable in containerd: /var/lib/cni/results
	local id
	for id in $(rig_container_ids); do
		rm -f /var/lib/cni/results/*-"$id"-* 2>/dev/null || true
	done
	rm -f /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null || true
	rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true
	# containerd 1.6 hard-codes its shim socket dir; remove it if we left it empty
	rmdir /run/containerd/s /run/containerd 2>/dev/null || true
	# empty parent cgroups runc created for CRI pods without cgroup_parent
	rmdir /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io 2>/dev/null || true
	if [ $ok = 1 ]; then
		rm -rf "$CTRD_ROOT" "$CTRD_STATE" "$SHIM_SOCK_DIR" "$CNI_IPAM_DIR" "$RIG/tmp" "$RIG/opt"
	else
		log "WARNING: not deleting $CTRD_ROOT / $CTRD_STATE because mounts remain"
	fi
	rm -f "$CTRD_PID" "$RIG/variant" "$SOCK" "$SOCK.ttrpc"
}

# ----------------------------------------------------------------- cmds ---
cmd_up() {
	check_deps
	local cpid rpid
	if cpid="$(containerd_pid)" && rpid="$(registry_pid)" && [ -S "$SOCK" ]; then
		local running
		running="$(cat "$RIG/variant" 2>/dev/null || echo '?')"
		[ "$running" = "$VARIANT" ] ||
			die "rig is already up with RIG_CONTAINERD=$running (containerd pid $cpid); run 'hack/rig.sh down' first"
		log "rig already up (containerd pid $cpid, registry pid $rpid)"
		env_lines >"$RIG/env"
		env_lines
		return 0
	fi
	mkdir -p "$RIG"
	chmod 0711 "$RIG"
	exec 9>"$RIG/.lock"
	flock -w 120 9 || die "another hack/rig.sh holds $RIG/.lock"
	write_crictl_yaml
	start_registry
	ensure_images
	start_containerd
	if crictl_rig inspecti "$PAUSE_IMAGE" >/dev/null 2>&1; then
		log "pause image already present"
	else
		log "pre-pulling $PAUSE_IMAGE through CRI"
		crictl_rig pull "$PAUSE_IMAGE" >&2
	fi
	env_lines >"$RIG/env"
	log "rig is up; env written to $RIG/env"
	env_lines
}

cmd_down() {
	local purge=0
	[ "${1:-}" = "--purge" ] && purge=1
	if [ ! -d "$RIG" ]; then
		log "nothing to do ($RIG does not exist)"
		return 0
	fi
	exec 9>"$RIG/.lock"
	flock -w 120 9 || die "another hack/rig.sh holds $RIG/.lock"
	local pid
	if pid="$(containerd_pid)"; then
		if [ -S "$SOCK" ] && [ -x "$CBIN/crictl" ]; then
			log "removing all CRI pods and containers"
			crictl_rig rmp -fa >&2 || log "WARNING: crictl rmp -fa failed"
			crictl_rig rm -fa >&2 || log "WARNING: crictl rm -fa failed"
		fi
		stop_pid "$pid" containerd 15
	fi
	cleanup_containerd_leftovers
	if pid="$(registry_pid)"; then
		stop_pid "$pid" registry 10
	fi
	rm -f "$REG_PIDF"
	if [ -f "$RIG/ip_forward.orig" ]; then
		cat "$RIG/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward 2>/dev/null || true
		rm -f "$RIG/ip_forward.orig"
	fi
	if [ $purge = 1 ]; then
		if [ -n "$(rig_mounts)" ]; then
			die "refusing to purge $RIG: mounts remain"
		fi
		rm -rf "$RIG"
		log "purged $RIG"
	fi
	log "rig is down"
}

cmd_status() {
	local pid rc=0
	echo "rig dir:     $RIG"
	if pid="$(registry_pid)"; then
		echo "registry:    running (pid $pid) on http://$REG $(registry_answers && echo answering || echo NOT-answering)"
	else
		echo "registry:    stopped"; rc=1
	fi
	if [ "$(cat "$IMG_DIR/stamp" 2>/dev/null)" != "" ]; then
		echo "images:      built ($IMG_DIR)"
	else
		echo "images:      not built"
	fi
	if pid="$(containerd_pid)"; then
		local v bin
		v="$(cat "$RIG/variant" 2>/dev/null || echo '?')"
		bin="$(readlink "/proc/$pid/exe" 2>/dev/null || echo '?')"
		echo "containerd:  running (pid $pid, RIG_CONTAINERD=$v, $bin) at unix://$SOCK"
		if cri_ready; then
			echo "cri:         RuntimeReady=true NetworkReady=true"
		else
			echo "cri:         NOT ready"; rc=1
		fi
		echo "pods:        $(crictl_rig pods -q 2>/dev/null | wc -l)"
		echo "containers:  $(crictl_rig ps -aq 2>/dev/null | wc -l)"
	else
		echo "containerd:  stopped"; rc=1
	fi
	echo "shims:       $(rig_shim_pids | wc -l)"
	echo "mounts:      $(rig_mounts | wc -l) under $RIG"
	if ip -br addr show "$BRIDGE" >/dev/null 2>&1; then
		echo "bridge:      $(ip -br addr show "$BRIDGE")"
	else
		echo "bridge:      $BRIDGE absent"
	fi
	return $rc
}

# kill-containerd: SIGKILL the rig's containerd, leaving its shims,
# containers, state and network as a crash would. start-containerd: start
# it again on that state (a restart after a crash). Both for tests of
# runtime outages.
cmd_kill_containerd() {
	local pid i
	pid="$(containerd_pid)" || die "containerd is not running"
	kill -KILL "$pid"
	for ((i = 0; i < 100; i++)); do
		[ -s "/proc/$pid/cmdline" ] || { log "containerd (pid $pid) killed"; return 0; }
		sleep 0.1
	done
	die "containerd (pid $pid) survived SIGKILL"
}

case "${1:-}" in
up) cmd_up ;;
kill-containerd) cmd_kill_containerd ;;
start-containerd)
	VARIANT="$(cat "$RIG/variant" 2>/dev/null || echo "$VARIANT")"
	start_containerd keep
	;;
down) shift; cmd_down "$@" ;;
env) env_lines ;;
status) cmd_status ;;
*)
	echo "usage: $0 up|down [--purge]|env|status|kill-containerd|start-containerd" >&2
	exit 2
	;;
esac
