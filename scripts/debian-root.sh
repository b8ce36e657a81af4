#!/usr/bin/env bash
# A Debian root file system as a tar, made by mmdebstrap from Debian's packages, kept in
# a cache outside the checkout so that a clean clone (CI) does not make it again:
#
#   scripts/debian-root.sh OUT.tar MMDEBSTRAP-ARGS...
#
# runs `mmdebstrap --quiet MMDEBSTRAP-ARGS... bookworm OUT.tar [MIRROR]` once per
# distinct ARGS and MIRROR and copies the kept tar afterwards. The cache
# (${VEMU_CACHE:-~/.cache/vemu}/debian-roots) holds the packages of the day it was made:
# delete it (or set MIRROR to a snapshot) for newer ones.
set -euo pipefail
out=$1
shift
mirror=${MIRROR:-}
cache=${VEMU_CACHE:-$HOME/.cache/vemu}/debian-roots
key=$(printf '%s\n' "$@" "$mirror" | sha256sum | cut -d' ' -f1)
if [ ! -f "$cache/$key.tar" ]; then
    mkdir -p "$cache"
    mmdebstrap --quiet "$@" bookworm "$cache/$key.part.tar" ${mirror:+"$mirror"}
    mv "$cache/$key.part.tar" "$cache/$key.tar"
fi
cp "$cache/$key.tar" "$out"
