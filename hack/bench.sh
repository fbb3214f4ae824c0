#!/usr/bin/env bash
# make bench: nodeagent beside its floor on the rig's containerd 2.x.
# The rig stays up afterwards (make rig-down stops it).
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash hack/rig.sh up)"
go run ./test/bench "$@"
