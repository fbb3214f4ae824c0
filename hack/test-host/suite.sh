#!/usr/bin/env bash
# make test-host: nodeagent's host suite (test/host) in a booted Debian
# guest — systemd as PID 1, cgroup v2, Debian's containerd with
# SystemdCgroup = true, nodeagent installed by `make install` and run by
# its unit. See README.md.
#
#   hack/test-host/suite.sh            (as root; TEST_HOST_TIMEOUT seconds, default 2400)
#   TEST_HOST_CGROUP=v1 hack/test-host/suite.sh   the same on cgroup v1
#                                      (systemd.unified_cgroup_hierarchy=0)
#
# Builds nodeagent, the suite (go test -c -tags testhost ./test/host) and
# the test images, shares them into the guest with guest-run.sh, boots it
# (run.sh, on the cached image of image.sh), and after the guest powered
# off checks what its shutdown left: the preStop hooks of the regular pod,
# then of the critical one. Results stay in the share's out/ (printed at
# the end); exit 0 only when every phase passed and the power-off went as
# the kubelet's graceful shutdown goes.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
# shellcheck source=common.sh
. "$HERE/common.sh"
export PATH="/usr/local/go/bin:$PATH"

SHARE="${TEST_HOST_SHARE:-$TH_CACHE/share}"
# A TEST_HOST_SHARE given is emptied only when this script made it (or
# it is empty); the default one in the cache is always ours.
if [ -n "${TEST_HOST_SHARE:-}" ] && [ -d "$SHARE" ] && [ -n "$(ls -A "$SHARE")" ] && [ ! -f "$SHARE/.test-host-share" ]; then
	die "TEST_HOST_SHARE $SHARE is not empty and not a share of suite.sh's; not removing it"
fi
rm -rf "$SHARE"
mkdir -p "$SHARE/src/bin" "$SHARE/out"
touch "$SHARE/.test-host-share"

log "building nodeagent and the host suite"
bash "$ROOT/hack/build.sh" "$SHARE/src/bin/nodeagent"
(cd "$ROOT" && go test -c -tags testhost -o "$SHARE/hosttest" ./test/host)
cp -r "$ROOT/Makefile" "$ROOT/README.md" "$ROOT/deploy" "$SHARE/src/"
cp "$HERE/guest-run.sh" "$SHARE/guest-run.sh"
case "${TEST_HOST_CGROUP:=v2}" in
v2) ;;
v1) export TEST_HOST_APPEND="${TEST_HOST_APPEND:+$TEST_HOST_APPEND }systemd.unified_cgroup_hierarchy=0" ;;
*) die "TEST_HOST_CGROUP must be v1 or v2" ;;
esac
echo "$TEST_HOST_CGROUP" >"$SHARE/cgroup"
log "building the test images"
bash "$ROOT/hack/images/build.sh" "$SHARE/images" >&2

rc=0
TEST_HOST_MEM="${TEST_HOST_MEM:-4096}" bash "$HERE/run.sh" "$SHARE" "${TEST_HOST_TIMEOUT:-2400}" || rc=$?
OUTD="$SHARE/out"
# guest-run.sh writes its result before it asks for the power-off (the
# unit's own exit code may not be written while the system goes down).
if [ -f "$OUTD/result" ]; then
	rc="$(cat "$OUTD/result")"
elif [ "$rc" -eq 0 ]; then
	rc=1
fi
[[ "$rc" =~ ^[0-9]+$ ]] || rc=1 # an empty or torn result is a failure

for f in "$OUTD"/test-*.log; do
	[ -f "$f" ] || continue
	echo "===== $(basename "$f")"
	grep -E '^(=== RUN|--- |\s+\S+_test\.go:|PASS|FAIL|ok )' "$f" || true
done

# The power-off: logind waited for the agent's delay lock while the
# regular pod's preStop hook ran, then the critical pod's.
order="$(cat "$OUTD/marks/order" 2>/dev/null || true)"
if [ "$order" != $'regular\ncritical' ]; then
	echo "===== power-off: the preStop hooks ran as '${order//$'\n'/,}'; want regular, then critical" >&2
	rc=1
else
	echo "===== power-off: preStop hooks ran regular, then critical"
fi
if [ "$rc" -ne 0 ]; then
	echo "test-host: FAILED (results in $OUTD)" >&2
	exit 1
fi
echo "test-host: PASS (results in $OUTD)"
