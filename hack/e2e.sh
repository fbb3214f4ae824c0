#!/usr/bin/env bash
# Runs the end-to-end tests against a rig this script brings up and tears
# down: the full suite on containerd 2.x (evented PLEG path), then the core
# slice on Debian's containerd 1.6 (no GetContainerEvents: relist path).
# Fails when the tests cannot run: a skipped e2e run is not a pass.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/root/.cache/nodeagent-rig/bin:$PATH"

variants=${NODEAGENT_E2E_VARIANTS:-"v2 debian"}
started=""
cleanup() {
	if [ -n "$started" ]; then
		bash hack/rig.sh down >&2 || true
	fi
}
trap cleanup EXIT

for variant in $variants; do
	# A rig of another variant may be up from an earlier run: start clean.
	bash hack/rig.sh down >&2
	started=1
	eval "$(RIG_CONTAINERD=$variant bash hack/rig.sh up)"
	run=${NODEAGENT_E2E_RUN:-}
	if [ "$variant" = debian ]; then
		run=${NODEAGENT_E2E_DEBIAN_RUN:-'TestManifest|TestBroken|TestAdmission|TestAdopt|TestCrashLoopFirst|TestRestartPolicyNever|TestGraceful|TestHealthz|TestSubPath|TestRuntimeOutage|TestStartError|TestImageVolume|TestAPINodeJoinsAndRunsAPIPods|TestStatsSummary|TestSecurityContextIdentity|TestNetworkMACSpoofing'}
	fi
	echo "e2e: running against containerd $variant${run:+ (tests: $run)}" >&2
	set +e
	go test -tags integration -count=1 -timeout 30m ${run:+-run "$run"} -v ./test/e2e/ 2>&1 |
		tee "/tmp/nodeagent-e2e-$variant.log" | grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|_test.go:[0-9]+:|^ +[a-z_]+_test.go'
	status=${PIPESTATUS[0]}
	set -e
	if [ "$status" != 0 ]; then
		echo "e2e: FAILED against containerd $variant (full log /tmp/nodeagent-e2e-$variant.log)" >&2
		exit "$status"
	fi
	if ! grep -q -- '--- PASS' "/tmp/nodeagent-e2e-$variant.log"; then
		echo "e2e: no test passed against containerd $variant: treating as failure" >&2
		exit 1
	fi
	if grep -q -- '--- SKIP' "/tmp/nodeagent-e2e-$variant.log"; then
		echo "e2e: some tests were skipped against containerd $variant: treating as failure" >&2
		grep -- '--- SKIP' "/tmp/nodeagent-e2e-$variant.log" >&2
		exit 1
	fi
done
echo "e2e: all variants passed" >&2
