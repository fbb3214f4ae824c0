#!/usr/bin/env bash
# Boot the nodeagent test host (a Debian bookworm VM under qemu TCG, systemd
# as PID 1, cgroup v2) with SHARE_DIR shared into it at /host, run
# SHARE_DIR/guest-run.sh there as root once the system is up, and stop.
# See README.md.
#
#   hack/test-host/run.sh SHARE_DIR [TIMEOUT_SECONDS]    (default 1500)
#
# The guest writes SHARE_DIR/out/guest.log (the script's stdout+stderr) and
# SHARE_DIR/out/exit-code, then powers off (unless SHARE_DIR/out/no-poweroff
# exists: then guest-run.sh must power the guest off itself). run.sh also
# leaves SHARE_DIR/out/console.log (the serial console) and qemu.log.
#
# Exits with guest-run.sh's exit code; 124 when the guest was killed after
# TIMEOUT_SECONDS, 125 when it stopped without writing an exit code. On any
# non-zero exit it prints the tails of console.log and guest.log to stderr.
#
# Knobs: TEST_HOST_APPEND (extra kernel args, e.g.
# "systemd.unified_cgroup_hierarchy=0" for a cgroup v1 comparison run),
# TEST_HOST_CPUS (default 2), TEST_HOST_MEM (MiB, default 3072),
# TEST_HOST_CPU_MODEL (qemu -cpu, default max),
# TEST_HOST_FOLLOW=1 (stream guest.log to stderr while it runs),
# TEST_HOST_REBOOT=1 (a guest reboot reboots instead of stopping qemu; the
# overlay disk survives it and testhost-run.service runs guest-run.sh again).
#
# Each run boots a fresh qcow2 overlay (in a temp dir, deleted afterwards) on
# the cached base image from image.sh, which never changes. The guest has no
# network (-nic none): loopback and its own CNI bridge only.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=common.sh
. "$HERE/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	die "usage: $0 SHARE_DIR [TIMEOUT_SECONDS]"
fi
[ -d "$1" ] || die "SHARE_DIR $1 is not a directory"
SHARE="$(realpath "$1")"
TIMEOUT="${2:-1500}"
[[ "$TIMEOUT" =~ ^[1-9][0-9]*$ ]] || die "TIMEOUT_SECONDS must be a positive integer (got '$TIMEOUT')"
case "$SHARE" in *,*) die "SHARE_DIR must not contain ',' (qemu -virtfs syntax): $SHARE" ;; esac
[ "$(id -u)" -eq 0 ] || die "must run as root"
ensure_pkgs qemu-system-x86 qemu-utils

IMG="$(bash "$HERE/image.sh" | tail -n 1)"
[ -f "$IMG/stamp" ] || die "image.sh did not produce an image (got '$IMG')"

OUTD="$SHARE/out"
mkdir -p "$OUTD"
rm -f "$OUTD/exit-code" "$OUTD/exit-code.tmp" "$OUTD/guest.log" "$OUTD/console.log" \
	"$OUTD/qemu.log" "$OUTD/started-uptime"
[ -f "$SHARE/guest-run.sh" ] || log "warning: $SHARE/guest-run.sh is missing; the guest will report exit code 127"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/nodeagent-test-host.XXXXXX")"
QPID=""
FPID=""
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
		log "stopping qemu (pid $QPID)"
		kill "$QPID" 2>/dev/null || true
		sleep 2
		kill -9 "$QPID" 2>/dev/null || true
	fi
	if [ -n "$FPID" ]; then
		kill "$FPID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

qemu-img create -q -f qcow2 -b "$IMG/base.qcow2" -F qcow2 "$TMP/overlay.qcow2"

# panic=-1 with -no-reboot: a guest kernel panic stops qemu at once.
append="root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1"
append+=" loglevel=4 systemd.show_status=1 panic=-1 mitigations=off"
append+="${TEST_HOST_APPEND:+ $TEST_HOST_APPEND}"
qemu=(
	qemu-system-x86_64
	-accel tcg -cpu "${TEST_HOST_CPU_MODEL:-max}"
	-smp "${TEST_HOST_CPUS:-2}" -m "${TEST_HOST_MEM:-3072}"
	# no default devices (VGA, NIC, floppy, cdrom); serial console to a file
	-nodefaults -display none -monitor none -serial "file:$OUTD/console.log"
	-kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" -append "$append"
	# the overlay is thrown away afterwards: no need for host flushes
	-drive "file=$TMP/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe"
	-virtfs "local,path=$SHARE,mount_tag=host,security_model=none,multidevs=remap,id=host"
	-device virtio-rng-pci
	-nic none
)
[ "${TEST_HOST_REBOOT:-0}" = 1 ] || qemu+=(-no-reboot)

log "booting $(basename "$IMG") with $SHARE at /host (timeout ${TIMEOUT}s; console $OUTD/console.log)"
start=$SECONDS
"${qemu[@]}" </dev/null >"$OUTD/qemu.log" 2>&1 &
QPID=$!
if [ "${TEST_HOST_FOLLOW:-0}" = 1 ]; then
	tail -n +1 -F "$OUTD/guest.log" >&2 2>/dev/null &
	FPID=$!
fi

timed_out=0
done_at=""
while kill -0 "$QPID" 2>/dev/null; do
	if [ -z "$done_at" ] && [ -f "$OUTD/exit-code" ]; then
		done_at=$SECONDS
	fi
	if ((SECONDS - start >= TIMEOUT)); then
		timed_out=1
		log "timeout: the guest is still running after ${TIMEOUT}s; killing qemu (pid $QPID)"
		kill "$QPID" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$QPID" 2>/dev/null || break
			sleep 1
		done
		kill -9 "$QPID" 2>/dev/null || true
		break
	fi
	sleep 1
done
qrc=0
wait "$QPID" || qrc=$?
QPID=""
end=$SECONDS
if [ -n "$FPID" ]; then
	sleep 1 # let tail print the last lines
	kill "$FPID" 2>/dev/null || true
	wait "$FPID" 2>/dev/null || true
	FPID=""
fi

started="$(cat "$OUTD/started-uptime" 2>/dev/null || echo '?')"
timing="qemu ran $((end - start))s; guest-run.sh started at guest uptime ${started}s"
[ -n "$done_at" ] && timing+="; exit code written at $((done_at - start))s, qemu gone $((end - done_at))s later"
log "$timing"

show_tails() {
	{
		echo "----- qemu exit status $qrc; qemu.log:"
		tail -n 20 "$OUTD/qemu.log" 2>/dev/null || true
		echo "----- tail of $OUTD/console.log:"
		tail -n 40 "$OUTD/console.log" 2>/dev/null || true
		echo "----- tail of $OUTD/guest.log:"
		tail -n 60 "$OUTD/guest.log" 2>/dev/null || echo "(no guest.log)"
		echo "-----"
	} >&2
}

if [ "$timed_out" = 1 ]; then
	show_tails
	log "error: timed out after ${TIMEOUT}s (killed qemu)"
	exit 124
fi
if [ ! -f "$OUTD/exit-code" ]; then
	show_tails
	log "error: the guest stopped without writing out/exit-code (qemu exit status $qrc)"
	exit 125
fi
rc="$(cat "$OUTD/exit-code")"
[[ "$rc" =~ ^[0-9]+$ ]] || {
	show_tails
	die "out/exit-code holds '$rc', not a number"
}
if [ "$rc" -ne 0 ]; then
	show_tails
	log "guest-run.sh exited $rc"
fi
exit "$rc"
