#!/usr/bin/env bash
# Images for the tests of image nodes, made here from Debian's packages (no image comes
# from the internet), in target/test-images/:
#   alpha/      an OCI layout: a small Debian with ping and ip whose main process notes
#               how it was started; alpha.tar the same image as a docker-archive (what
#               `docker save` writes)
#   frr/        an OCI layout with FRR (no main process: `kind: frr` starts it)
#   bird/       an OCI layout with BIRD, a different image (`kind: bird`)
# Made once: kept while this script is unchanged (the Debian roots in a cache outside
# the checkout: scripts/debian-root.sh). Needs root, mmdebstrap, umoci and
# skopeo (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/test-images
stamp="$out/stamp"
want=$(sha256sum "$0" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# make_image NAME PACKAGES: a Debian with PACKAGES (ping and ip always), its
# documentation left out, /etc/vemu-image saying which image a node runs; an OCI layout
# at $work/NAME with the tag NAME.
make_image() {
    local name=$1 packages=$2
    scripts/debian-root.sh "$work/$name.tar" --variant=essential \
        --include="iputils-ping,iproute2$packages" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook="echo $name > \"\$1/etc/vemu-image\"; mkdir -p \"\$1/srv\""
    umoci init --layout "$work/$name"
    umoci new --image "$work/$name:$name"
    umoci unpack --image "$work/$name:$name" "$work/bundle-$name"
    tar -xf "$work/$name.tar" -C "$work/bundle-$name/rootfs"
    umoci repack --image "$work/$name:$name" "$work/bundle-$name"
    rm -rf "$work/bundle-$name" "$work/$name.tar"
}

make_image alpha ""
# Its main process writes down what it was started with, then stays.
umoci config --image "$work/alpha:alpha" \
    --config.entrypoint=/bin/sh --config.entrypoint=-c \
    --config.cmd='echo "$GREETING from $(pwd)" > /tmp/main-ran; exec sleep infinity' \
    --config.env=GREETING=hello --config.workingdir=/srv
make_image frr ",frr"
make_image bird ",bird2"
for name in alpha frr bird; do
    umoci gc --layout "$work/$name"
    mv "$work/$name" "$out/$name"
done
skopeo copy --quiet "oci:$out/alpha:alpha" "docker-archive:$out/alpha.tar:vemu-test/alpha:1"
echo "$want" > "$stamp"
