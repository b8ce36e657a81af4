#!/usr/bin/env bash
# vemu's own image — what the Kubernetes agents and the VemuLab operator run
# (deploy/kubernetes, deploy/helm) — made without a Dockerfile or a container engine:
# a Debian root from Debian's packages (mmdebstrap), vemu's binaries built here copied
# in, packed as an OCI image (umoci). Needs root, mmdebstrap, umoci and skopeo
# (scripts/setup.sh) and the release binaries (cargo build --release).
#
#   scripts/image.sh [OUT]     OUT (default target/image) gets
#                              vemu/      an OCI layout, tag `latest`
#                              vemu.tar   the same as an oci-archive (`ctr images import`)
#                              digest     the image's manifest digest (also printed)
#
# Reproducible: every timestamp is SOURCE_DATE_EPOCH (default: the last commit's time),
# so the same binaries and the same Debian packages give the same digest; the packages
# are Debian's of the day unless a snapshot mirror pins them (MIRROR, e.g.
# http://snapshot.debian.org/archive/debian/20261120T000000Z). Made again only when
# the binaries, this script or MIRROR change.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/image}
bins=(target/release/vemu target/release/vemu-init target/release/vemu-operator)
for b in "${bins[@]}"; do
    [ -x "$b" ] || { echo "image: $b is missing (cargo build --release first)" >&2; exit 1; }
done
mirror=${MIRROR:-}
want=$( (cat "$0" "${bins[@]}"; echo "$mirror") | sha256sum | cut -d' ' -f1)
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ] && [ -f "$out/digest" ]; then
    cat "$out/digest"
    exit 0
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The binaries without their debugging information (a tenth of their size).
mkdir -p "$work/bin"
for b in "${bins[@]}"; do
    strip --strip-debug -o "$work/bin/$(basename "$b")" "$b"
    touch -d "@$SOURCE_DATE_EPOCH" "$work/bin/$(basename "$b")"
done
# What labs run in their nodes and what vemu itself calls (as deploy/Containerfile).
# (The Debian root is kept outside the checkout: scripts/debian-root.sh.)
scripts/debian-root.sh "$work/rootfs.tar" --variant=essential \
    --include=iproute2,iputils-ping,iperf3,procps,nftables,ca-certificates,libpcap0.8,libdbus-1-3,libsystemd0,libcap2 \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*'
umoci init --layout "$work/vemu"
umoci new --image "$work/vemu:latest"
umoci unpack --image "$work/vemu:latest" "$work/bundle"
tar -xf "$work/rootfs.tar" -C "$work/bundle/rootfs"
cp "$work/bin/vemu" "$work/bin/vemu-init" "$work/bin/vemu-operator" "$work/bundle/rootfs/usr/local/bin/"
# umoci keeps each file's own time: every one SOURCE_DATE_EPOCH, so that the digest
# does not depend on when the kept Debian root was made.
find "$work/bundle/rootfs" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
umoci repack --image "$work/vemu:latest" --history.created "$created" \
    --history.created_by "scripts/image.sh" "$work/bundle"
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
umoci config --image "$work/vemu:latest" --created "$created" --history.created "$created" \
    --history.created_by "scripts/image.sh (config)" \
    --config.entrypoint=vemu --config.cmd=--help \
    --config.label "org.opencontainers.image.title=vemu" \
    --config.label "org.opencontainers.image.revision=$revision" \
    --config.label "org.opencontainers.image.created=$created"
umoci gc --layout "$work/vemu"
mv "$work/vemu" "$out/vemu"
skopeo copy --quiet "oci:$out/vemu:latest" "oci-archive:$out/vemu.tar:vemu:latest"
python3 -c 'import json,sys; m=[x for x in json.load(open(sys.argv[1]))["manifests"] if x.get("annotations",{}).get("org.opencontainers.image.ref.name")=="latest"]; print(m[0]["digest"])' \
    "$out/vemu/index.json" > "$out/digest"
echo "$want" > "$out/stamp"
cat "$out/digest"
