#!/usr/bin/env bash
# The pod sandbox image ("pause") of the real-kubelet test's containerd, made here: no
# image can be pulled from the internet on the test machine. Kubernetes' own pause.c
# (from the k8s.io/kubernetes Go module the test cluster is built from), compiled
# statically, alone in an OCI image (umoci) named registry.k8s.io/pause:3.10 — the name
# containerd's configuration in the test gives as its sandbox_image.
#
#   scripts/pause-image.sh [OUT]   OUT (default target/image) gets pause.tar, an
#                                  oci-archive for `ctr images import`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/image}
src=$(go list -C deploy/kubernetes/test-apiserver -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
want=$( (cat "$0" "$src") | sha256sum | cut -d' ' -f1)
if [ -f "$out/pause.stamp" ] && [ "$(cat "$out/pause.stamp")" = "$want" ] && [ -f "$out/pause.tar" ]; then
    exit 0
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
umoci init --layout "$work/pause"
umoci new --image "$work/pause:3.10"
umoci unpack --image "$work/pause:3.10" "$work/bundle"
gcc -Os -static -DVERSION=3.10 -o "$work/bundle/rootfs/pause" "$src"
strip "$work/bundle/rootfs/pause"
touch -d "@$SOURCE_DATE_EPOCH" "$work/bundle/rootfs/pause"
umoci repack --image "$work/pause:3.10" --history.created "$created" "$work/bundle"
umoci config --image "$work/pause:3.10" --created "$created" --history.created "$created" \
    --config.entrypoint=/pause --config.user=65535:65535
umoci gc --layout "$work/pause"
rm -f "$out/pause.tar"
skopeo copy --quiet "oci:$work/pause:3.10" "oci-archive:$out/pause.tar:registry.k8s.io/pause:3.10"
echo "$want" > "$out/pause.stamp"
