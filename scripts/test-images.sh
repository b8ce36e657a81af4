#!/usr/bin/env bash
# Images for the tests of image nodes, made here from Debian's packages (no image comes
# from the internet): target/test-images/alpha/ (an OCI layout) and alpha.tar (the same
# image as a docker-archive, what `docker save` writes). Made once: kept while this
# script is unchanged. Needs root, mmdebstrap, umoci and skopeo (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/test-images
stamp="$out/stamp"
want=$(sha256sum "$0" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -d "$out/alpha" ] && [ -f "$out/alpha.tar" ]; then
    exit 0
fi
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A small Debian with ping and ip, its documentation left out; a marker file says which
# image a node runs.
mmdebstrap --quiet --variant=essential --include=iputils-ping,iproute2 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='echo alpha > "$1/etc/vemu-image"; mkdir -p "$1/srv"' \
    bookworm "$work/rootfs.tar"
umoci init --layout "$work/oci"
umoci new --image "$work/oci:alpha"
umoci unpack --image "$work/oci:alpha" "$work/bundle"
tar -xf "$work/rootfs.tar" -C "$work/bundle/rootfs"
umoci repack --image "$work/oci:alpha" "$work/bundle"
# Its main process writes down what it was started with, then stays.
umoci config --image "$work/oci:alpha" \
    --config.entrypoint=/bin/sh --config.entrypoint=-c \
    --config.cmd='echo "$GREETING from $(pwd)" > /tmp/main-ran; exec sleep infinity' \
    --config.env=GREETING=hello --config.workingdir=/srv
mv "$work/oci" "$out/alpha"
skopeo copy --quiet "oci:$out/alpha:alpha" "docker-archive:$out/alpha.tar:vemu-test/alpha:1"
echo "$want" > "$stamp"
