#!/usr/bin/env bash
# The main job: nodeagent with manifests/ on the rig's private containerd.
# Ctrl-C stops nodeagent (pods keep running; a restart adopts them);
# `make rig-down` stops containerd, the registry and removes the pods.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(bash hack/rig.sh up)"
mkdir -p /var/lib/nodeagent-run
echo "run: nodeagent with manifests/ on $NODEAGENT_CONTAINERD_ADDRESS" >&2
echo "run: in another shell: source $NODEAGENT_RIG_DIR/env && crictl pods; bin/nodeagent pods --root-dir /var/lib/nodeagent-run" >&2
exec bin/nodeagent \
	--manifest-dir manifests \
	--container-runtime-endpoint "$NODEAGENT_CONTAINERD_ADDRESS" \
	--root-dir /var/lib/nodeagent-run \
	--cni-conf-dir "$NODEAGENT_CNI_CONF_DIR" \
	--cni-bin-dir "$NODEAGENT_CNI_BIN_DIR" \
	--pod-cidr "$NODEAGENT_POD_CIDR" \
	"$@"
