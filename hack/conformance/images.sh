#!/usr/bin/env bash
# Build the conformance suite's stand-in images OFFLINE and push them to the
# rig's registry under the names `e2e.test --list-images` gives (already
# mapped to the local registry by KUBE_TEST_REPO_LIST).
#
#   hack/conformance/images.sh WORKDIR LISTFILE BINDIR
#
# LISTFILE: one image reference a line (e2e.test --list-images).
# BINDIR: holds agnhost and nnp (the nonewprivs payload).
# Stand-ins (see /work/shared/conformance-notes.md):
#   busybox     busybox-static, every applet linked, a `curl` shim (wget)
#   agnhost     /agnhost (entrypoint, CMD pause), /agnhost-2, busybox applets,
#               /uploads, user-defined-in-image (1000) in group-defined-in-image (50000)
#   nginx/httpd busybox httpd -f -p 80 -h /usr/share/nginx/html
#   nonewprivs  /usr/local/bin/nnp setuid root (4755), CMD nnp
#   kitten      agnhost + /data.json /kitten.jpg, CMD test-webserver, Alpine os-release
#   pause       hack/images/pause.c, static
# Only names in the rig's registry ($NODEAGENT_REGISTRY) are pushed; images of
# the invalid and private registries never are (pulls of them
# must fail); other names the suite lists but sig-node conformance does not
# use are reported and skipped. Idempotent: a reference already in the
# registry with this build's stamp is not pushed again.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WORK="${1:?usage: images.sh WORKDIR LISTFILE BINDIR}"
LIST="${2:?usage: images.sh WORKDIR LISTFILE BINDIR}"
BINDIR="${3:?usage: images.sh WORKDIR LISTFILE BINDIR}"
BUSYBOX_BIN="${BUSYBOX_BIN:-/bin/busybox}"
K8S_SRC="${K8S_SRC:?K8S_SRC must name the k8s.io/kubernetes module directory}"
REG="${NODEAGENT_REGISTRY:?NODEAGENT_REGISTRY must name the rig registry (hack/rig.sh env)}"

log() { echo "conformance-images: $*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
fsize() { stat -c %s "$1"; }

# make_layout LAYOUT_DIR ROOTFS_DIR CONFIG_BODY (as hack/images/build.sh:
# one deterministic layer; the tag is given at push time).
make_layout() {
	local dir="$1" rootfs="$2" cfgbody="$3" tmp="$1.tmp"
	rm -rf "$dir" "$tmp"
	mkdir -p "$dir/blobs/sha256" "$tmp"
	tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner \
		--format=gnu -C "$rootfs" -cf "$tmp/layer.tar" .
	local diffid ldig lsize cdig csize mdig msize
	diffid="$(sha "$tmp/layer.tar")"
	gzip -n -6 -c "$tmp/layer.tar" >"$tmp/layer.tar.gz"
	ldig="$(sha "$tmp/layer.tar.gz")"; lsize="$(fsize "$tmp/layer.tar.gz")"
	mv "$tmp/layer.tar.gz" "$dir/blobs/sha256/$ldig"
	printf '%s' "{\"created\":\"1970-01-01T00:00:00Z\",\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{$cfgbody},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diffid\"]},\"history\":[{\"created\":\"1970-01-01T00:00:00Z\",\"created_by\":\"nodeagent hack/conformance/images.sh\"}]}" >"$tmp/config.json"
	cdig="$(sha "$tmp/config.json")"; csize="$(fsize "$tmp/config.json")"
	mv "$tmp/config.json" "$dir/blobs/sha256/$cdig"
	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$cdig\",\"size\":$csize},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$ldig\",\"size\":$lsize}]}" >"$tmp/manifest.json"
	mdig="$(sha "$tmp/manifest.json")"; msize="$(fsize "$tmp/manifest.json")"
	mv "$tmp/manifest.json" "$dir/blobs/sha256/$mdig"
	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$mdig\",\"size\":$msize,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"},\"annotations\":{\"org.opencontainers.image.ref.name\":\"latest\"}}]}" >"$dir/index.json"
	printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
	rm -rf "$tmp"
}

PATH_ENV='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'

# busybox_rootfs DIR [extra passwd lines] [extra group lines]
busybox_rootfs() {
	local r="$1" applet
	mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root" "$r/proc" "$r/sys" "$r/dev" "$r/var" "$r/home" \
		"$r/usr/bin" "$r/usr/sbin" "$r/sbin" "$r/usr/local/bin"
	chmod 1777 "$r/tmp"; chmod 0700 "$r/root"
	cp "$BUSYBOX_BIN" "$r/bin/busybox"; chmod 0755 "$r/bin/busybox"
	while IFS= read -r applet; do
		case "$applet" in "" | busybox | */*) continue ;; esac
		ln -sf busybox "$r/bin/$applet"
	done < <("$BUSYBOX_BIN" --list)
	# some specs exec `curl http://…`; busybox has wget
	rm -f "$r/bin/curl"
	cat >"$r/bin/curl" <<'SH'
#!/bin/sh
# curl stand-in (nodeagent conformance images): GET the last http(s) argument.
url=
for a in "$@"; do case "$a" in http://* | https://*) url="$a" ;; esac; done
[ -n "$url" ] || { echo "curl stand-in: no http(s) URL in: $*" >&2; exit 2; }
exec wget -q -O - "$url"
SH
	chmod 0755 "$r/bin/curl"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n%s' "${2:-}" >"$r/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n%s' "${3:-}" >"$r/etc/group"
	printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$r/etc/hosts"
	echo 'hosts: files dns' >"$r/etc/nsswitch.conf"
	chmod 0644 "$r"/etc/*
}

alpine_os_release() {
	cat >"$1/etc/os-release" <<'OS'
NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.22.0
PRETTY_NAME="Alpine Linux v3.22 (nodeagent conformance stand-in)"
OS
}

build_all() {
	local out="$1" r
	rm -rf "$out"; mkdir -p "$out"
	local w="$out/.work"; mkdir -p "$w"

	r="$w/busybox"; busybox_rootfs "$r"
	make_layout "$out/busybox" "$r" "\"Env\":[$PATH_ENV],\"Cmd\":[\"sh\"]"

	r="$w/agnhost"
	busybox_rootfs "$r" 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh
' 'user-defined-in-image:x:1000:
group-defined-in-image:x:50000:user-defined-in-image
'
	mkdir -p "$r/uploads" "$r/home/user-defined-in-image"
	chown 1000:1000 "$r/home/user-defined-in-image" 2>/dev/null || true
	cp "$BINDIR/agnhost" "$r/agnhost"; chmod 0755 "$r/agnhost"
	ln -s agnhost "$r/agnhost-2"
	cp "$K8S_SRC/test/images/agnhost/porter/localhost.crt" "$K8S_SRC/test/images/agnhost/porter/localhost.key" "$r/"
	chmod 0644 "$r/localhost.crt" "$r/localhost.key"
	alpine_os_release "$r"
	make_layout "$out/agnhost" "$r" "\"Env\":[$PATH_ENV],\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"pause\"]"

	cp "$K8S_SRC/test/images/kitten/html/kitten.jpg" "$K8S_SRC/test/images/kitten/html/data.json" "$r/"
	chmod 0644 "$r/kitten.jpg" "$r/data.json"
	make_layout "$out/kitten" "$r" "\"Env\":[$PATH_ENV],\"Entrypoint\":[\"/agnhost\"],\"Cmd\":[\"test-webserver\"]"

	r="$w/nginx"; busybox_rootfs "$r"
	mkdir -p "$r/usr/share/nginx/html" "$r/usr/local/apache2/htdocs"
	echo '<html><body><h1>Welcome to nginx!</h1></body></html>' >"$r/usr/share/nginx/html/index.html"
	echo '<html><body><h1>It works!</h1></body></html>' >"$r/usr/local/apache2/htdocs/index.html"
	make_layout "$out/nginx" "$r" "\"Env\":[$PATH_ENV],\"ExposedPorts\":{\"80/tcp\":{}},\"Cmd\":[\"httpd\",\"-f\",\"-p\",\"80\",\"-h\",\"/usr/share/nginx/html\"]"

	r="$w/nonewprivs"; busybox_rootfs "$r"
	cp "$BINDIR/nnp" "$r/usr/local/bin/nnp"; chmod 4755 "$r/usr/local/bin/nnp"
	make_layout "$out/nonewprivs" "$r" "\"Env\":[$PATH_ENV],\"Cmd\":[\"nnp\"]"

	r="$w/pause"; mkdir -p "$r"
	gcc -static -Os -s -Wl,--build-id=none -o "$r/pause" "$HERE/../images/pause.c"
	make_layout "$out/pause" "$r" "\"Env\":[$PATH_ENV],\"Entrypoint\":[\"/pause\"],\"User\":\"65535:65535\""
	rm -rf "$w"
}

# kind_of REF: which stand-in serves REF ("" when none).
kind_of() {
	local ref="$1" repo name
	repo="${ref%:*}"
	# only the rig's registry: names KUBE_TEST_REPO_LIST does not map (a
	# busybox e2e_node hard-codes) cannot be pushed elsewhere
	[ "${ref%%/*}" = "$REG" ] || { echo ""; return; }
	case "$repo" in */invalid/* | */private/*) echo ""; return ;; esac
	name="${repo##*/}"
	case "$name" in
	busybox) echo busybox ;;
	agnhost) echo agnhost ;;
	nginx | httpd) echo nginx ;;
	nonewprivs) echo nonewprivs ;;
	kitten) echo kitten ;;
	pause) echo pause ;;
	*) echo "" ;;
	esac
}

want="$(cat "$0" "$HERE/../images/pause.c" "$BUSYBOX_BIN" "$BINDIR/agnhost" "$BINDIR/nnp" | sha256sum | cut -d' ' -f1)"
OUT="$WORK/layouts"
if [ "$(cat "$OUT/stamp" 2>/dev/null)" != "$want" ]; then
	log "building stand-in images in $OUT"
	build_all "$OUT"
	echo "$want" >"$OUT/stamp"
	rm -f "$WORK/pushed"
fi

printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >"$WORK/policy.json"
touch "$WORK/pushed"
skipped=()
while IFS= read -r ref; do
	[ -n "$ref" ] || continue
	kind="$(kind_of "$ref")"
	if [ -z "$kind" ]; then
		skipped+=("$ref")
		continue
	fi
	repo="${ref%:*}" tag="${ref##*:}" host="${ref%%/*}" path="${repo#*/}"
	if grep -qxF "$want $ref" "$WORK/pushed" &&
		curl -fsS -o /dev/null -I --max-time 5 \
			-H 'Accept: application/vnd.oci.image.manifest.v1+json' \
			-H 'Accept: application/vnd.oci.image.index.v1+json' \
			"http://$host/v2/$path/manifests/$tag" 2>/dev/null; then
		continue
	fi
	log "pushing $kind as $ref"
	skopeo --policy "$WORK/policy.json" --registries-conf /dev/null copy -q \
		--preserve-digests --dest-tls-verify=false "oci:$OUT/$kind" "docker://$ref" >&2
	echo "$want $ref" >>"$WORK/pushed"
done <"$LIST"
if [ "${#skipped[@]}" -gt 0 ]; then
	log "not pushed (invalid/private registry, or no stand-in): ${skipped[*]}"
fi
