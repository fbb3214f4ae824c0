#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME (default 10m; `make unit` passes 5s).
# A target fails on a finding: a failing input written, a panic, a failed
# check. Go 1.26's fuzz coordinator can also end a clean run with a bare
# "context deadline exceeded" as its time runs out (golang/go#75804,
# fixed in Go 1.27): such a run wrote nothing and is run once more; a
# second failure fails.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10m}
targets=(
	"FuzzStaticPods ./internal/podsource"
	"FuzzAPICheckpoint ./internal/podsource"
	"FuzzConfigFile ./cmd/nodeagent"
	"FuzzParseCRILine ./internal/logs"
	"FuzzReadLogs ./internal/logs"
	"FuzzCPUManagerState ./internal/cpumanager"
	"FuzzUnmarshal ./internal/cpumanager/state"
	"FuzzServerPaths ./internal/server"
)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
	read -r name pkg <<<"$t"
	for attempt in 1 2; do
		echo "fuzz: $name ($pkg) for $FUZZTIME" >&2
		if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1; then
			tail -n 1 "$log" >&2
			break
		fi
		cat "$log" >&2
		if [ "$attempt" = 1 ] && grep -q 'context deadline exceeded' "$log" &&
			! grep -Eq 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"; then
			echo "fuzz: $name ended with Go's fuzz-deadline race (golang/go#75804), no finding: once more" >&2
			continue
		fi
		echo "fuzz: $name FAILED" >&2
		exit 1
	done
done
