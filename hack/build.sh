#!/usr/bin/env bash
# Builds nodeagent: hack/build.sh [OUT] (default the repository's
# bin/nodeagent). The one place the binary's build flags live: make build,
# the e2e tests, the host suite and the conformance run all build through
# it.
#
# grpcnotrace: gRPC otherwise links golang.org/x/net/trace, whose init
# registers HTTP handlers that execute text/template. text/template calls
# reflect's MethodByName with a name known only at run time, and that turns
# off the linker's dead-method elimination for the whole program: every
# exported method of every reachable type is kept. Without it the binary's
# loaded text and read-only data fall from ~66 MB to ~40 MB — and so does
# the file-backed part of the agent's RSS (docs/performance.md). The e2e
# tests check that the binary they run links neither x/net/trace nor
# text/template's executor.
set -euo pipefail
out=${1:-$(dirname "$0")/../bin/nodeagent}
out=$(realpath -m "$out") # OUT is relative to where it is called from
cd "$(dirname "$0")/.."
exec "${GO:-go}" build -tags grpcnotrace -o "$out" ./cmd/nodeagent
