#!/usr/bin/env bash
# Build the nodeagent rig's test images OFFLINE as OCI image layouts.
#
#   hack/images/build.sh OUTDIR
#
# Produces (deterministically: fixed mtimes, sorted tar, gzip -n):
#   OUTDIR/pause    OCI layout, ref "3.10"   static /pause (hack/images/pause.c)
#   OUTDIR/busybox  OCI layout, ref "1.36"   /bin/busybox of busybox-static + applet links
#
# Needs: gcc (+ libc6-dev for -static), busybox-static, tar, gzip, sha256sum.
# Pushing is done by hack/rig.sh with skopeo.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:?usage: build.sh OUTDIR}"
BUSYBOX_BIN="${BUSYBOX_BIN:-/bin/busybox}"

die() { echo "build.sh: $*" >&2; exit 1; }
[ -x "$BUSYBOX_BIN" ] || die "$BUSYBOX_BIN missing (apt-get install busybox-static)"
command -v gcc >/dev/null || die "gcc missing"

# shellcheck source=hack/images/layout.sh
. "$HERE/layout.sh"

WORK="$OUT/.work"
rm -rf "$WORK"; mkdir -p "$WORK"

# --- pause -------------------------------------------------------------
P="$WORK/pause-rootfs"
mkdir -p "$P"
gcc -static -Os -s -Wl,--build-id=none -o "$P/pause" "$HERE/pause.c"
chmod 0755 "$P/pause"
make_layout "$OUT/pause" "$P" "3.10" \
	'"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":["/pause"],"User":"0"'

# --- busybox -----------------------------------------------------------
B="$WORK/busybox-rootfs"
mkdir -p "$B/bin" "$B/etc" "$B/tmp" "$B/root" "$B/proc" "$B/sys" "$B/dev" "$B/var" "$B/home"
chmod 1777 "$B/tmp"; chmod 0700 "$B/root"
cp "$BUSYBOX_BIN" "$B/bin/busybox"; chmod 0755 "$B/bin/busybox"
while IFS= read -r applet; do
	case "$applet" in ""|busybox|*/*) continue ;; esac
	ln -sf busybox "$B/bin/$applet"
done < <("$BUSYBOX_BIN" --list)
cat >"$B/etc/passwd" <<'EOP'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOP
cat >"$B/etc/group" <<'EOG'
root:x:0:
nogroup:x:65534:
EOG
cat >"$B/etc/hosts" <<'EOH'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
EOH
echo 'hosts: files' >"$B/etc/nsswitch.conf"
chmod 0644 "$B"/etc/*
make_layout "$OUT/busybox" "$B" "1.36" \
	'"Env":["PATH=/bin"],"Cmd":["sh"]'

rm -rf "$WORK"
