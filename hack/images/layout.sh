# make_layout, sourced by the image builders of hack/images: one-layer
# OCI image layouts, deterministic (fixed mtimes, sorted tar, gzip -n;
# GZIP_LEVEL, default 9).

sha() { sha256sum "$1" | cut -d' ' -f1; }
fsize() { stat -c %s "$1"; }

# make_layout LAYOUT_DIR ROOTFS_DIR REF CONFIG_BODY
#   CONFIG_BODY: JSON object body for the image "config" member.
make_layout() {
	local dir="$1" rootfs="$2" ref="$3" cfgbody="$4"
	rm -rf "$dir"
	mkdir -p "$dir/blobs/sha256"
	local tmp="$dir.tmp"
	rm -rf "$tmp"; mkdir -p "$tmp"

	# Deterministic layer tar.
	tar --sort=name --mtime='@0' --owner=0 --group=0 --numeric-owner \
		--format=gnu -C "$rootfs" -cf "$tmp/layer.tar" .
	local diffid; diffid="$(sha "$tmp/layer.tar")"
	gzip -n "-${GZIP_LEVEL:-9}" -c "$tmp/layer.tar" >"$tmp/layer.tar.gz"
	local ldig lsize
	ldig="$(sha "$tmp/layer.tar.gz")"; lsize="$(fsize "$tmp/layer.tar.gz")"
	mv "$tmp/layer.tar.gz" "$dir/blobs/sha256/$ldig"

	printf '%s' "{\"created\":\"1970-01-01T00:00:00Z\",\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{$cfgbody},\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diffid\"]},\"history\":[{\"created\":\"1970-01-01T00:00:00Z\",\"created_by\":\"nodeagent hack/images/build.sh\"}]}" >"$tmp/config.json"
	local cdig csize
	cdig="$(sha "$tmp/config.json")"; csize="$(fsize "$tmp/config.json")"
	mv "$tmp/config.json" "$dir/blobs/sha256/$cdig"

	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$cdig\",\"size\":$csize},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$ldig\",\"size\":$lsize}]}" >"$tmp/manifest.json"
	local mdig msize
	mdig="$(sha "$tmp/manifest.json")"; msize="$(fsize "$tmp/manifest.json")"
	mv "$tmp/manifest.json" "$dir/blobs/sha256/$mdig"

	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$mdig\",\"size\":$msize,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"},\"annotations\":{\"org.opencontainers.image.ref.name\":\"$ref\"}}]}" >"$dir/index.json"
	printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
	rm -rf "$tmp"
	echo "built $dir ($ref) manifest sha256:$mdig layer $lsize bytes"
}
