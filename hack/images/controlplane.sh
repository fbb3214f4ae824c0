#!/usr/bin/env bash
# Build kubeadm's control-plane images OFFLINE as OCI image layouts, from
# the binaries hack/install-controlplane.sh built (the kubeadm init test):
#
#   hack/images/controlplane.sh OUTDIR BINDIR K8S_VERSION ETCD_TAG
#
# Produces OUTDIR/<name> (ref K8S_VERSION, etcd: ETCD_TAG) for
# kube-apiserver, kube-controller-manager, kube-scheduler and etcd: the
# static binary in /usr/local/bin, PATH set, as the upstream images have
# them (kubeadm's manifests run them by name). Layers are gzip -1: the
# binaries are large and the layouts are only pushed to the local
# registry. OUTDIR/stamp names what was built; a second run with the same
# binaries does nothing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:?usage: controlplane.sh OUTDIR BINDIR K8S_VERSION ETCD_TAG}"
BIN="${2:?BINDIR}"
VERSION="${3:?K8S_VERSION}"
ETCD_TAG="${4:?ETCD_TAG}"
NAMES=(kube-apiserver kube-controller-manager kube-scheduler etcd)

die() { echo "controlplane.sh: $*" >&2; exit 1; }
for n in "${NAMES[@]}"; do [ -x "$BIN/$n" ] || die "$BIN/$n missing (bash hack/install-controlplane.sh)"; done

# shellcheck source=hack/images/layout.sh
. "$HERE/layout.sh"

want="$( (cd "$BIN" && stat -c '%n %s %Y' "${NAMES[@]}"; echo "$VERSION $ETCD_TAG"; cat "$HERE/layout.sh" "$HERE/controlplane.sh") | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$OUT/stamp" 2>/dev/null)" = "$want" ]; then
	echo "control-plane images already built in $OUT" >&2
	exit 0
fi
rm -f "$OUT/stamp"
mkdir -p "$OUT"
WORK="$OUT/.work"
for n in "${NAMES[@]}"; do
	rm -rf "$WORK"
	mkdir -p "$WORK/usr/local/bin" "$WORK/tmp" "$WORK/etc"
	chmod 1777 "$WORK/tmp"
	cp "$BIN/$n" "$WORK/usr/local/bin/$n"
	chmod 0755 "$WORK/usr/local/bin/$n"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$WORK/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$WORK/etc/group"
	ref="$VERSION"
	[ "$n" = etcd ] && ref="$ETCD_TAG"
	GZIP_LEVEL=1 make_layout "$OUT/$n" "$WORK" "$ref" \
		'"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"User":"0"' >&2
done
rm -rf "$WORK"
echo "$want" >"$OUT/stamp"
