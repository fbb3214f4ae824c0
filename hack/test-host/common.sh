# shellcheck shell=bash
# Shared by hack/test-host/image.sh and run.sh (sourced, not run).
#
# Knobs: NODEAGENT_RIG_CACHE (default /root/.cache/nodeagent-rig); the
# test host's artifacts live in its test-host/<key>/.

# shellcheck disable=SC2034 # used by the scripts that source this file
TH_CACHE="${NODEAGENT_RIG_CACHE:-/root/.cache/nodeagent-rig}/test-host"

log() { echo "test-host: $*" >&2; }
die() {
	echo "test-host: error: $*" >&2
	exit 1
}

# ensure_pkgs PKG... installs the Debian packages that are missing
# (apt-get update only when something is), like hack/install-deps.sh.
ensure_pkgs() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ "${#missing[@]}" -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "must run as root to apt-get install ${missing[*]}"
	log "apt: installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${missing[@]}" >&2
}

# umount_under DIR unmounts everything mounted at or below DIR, deepest
# first (a build killed mid-chroot can leave /proc etc. mounted, and
# rm -rf must never walk into them).
umount_under() {
	local dir m
	dir="$(realpath -m "$1")"
	# /proc/self/mounts escapes blanks as \040; our dirs have none.
	awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts |
		sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
}
