#!/usr/bin/env bash
# Run every test: unit tests of the sans-IO cores, integration tests with real
# namespaces, ping, iperf3 and routing daemons (these need root), and the Python
# client's tests against real labs. Installs what is missing first.
set -euo pipefail
# Each phase's start time, so a slow CI run says where its time went.
phase() { echo "== $(date +%T) $*"; }
# Every check runs even when one before it failed, so that one run reports every
# failure (cargo's suites with --no-fail-fast too); the script exits non-zero at the
# end, naming what failed. A build that fails stops it at once.
failed=()
check() { local what=$1; shift; "$@" || failed+=("$what"); }
phase setup
. "$(dirname "$0")/../scripts/setup.sh"
phase lint
# No dependency cycle between the modules of a crate (docs/design.md, "Crate map").
check "module cycles (self-test)" python3 scripts/module_cycles.py --self-test
check "module cycles" python3 scripts/module_cycles.py
# Crate dependencies only as docs/design.md lists them; every crate and module on its map.
check "crate map (self-test)" python3 scripts/crate_map.py --self-test
check "crate map" python3 scripts/crate_map.py
# No file over 1,000 lines, no function over 150, unless listed with why (issue 63).
check "limits (self-test)" python3 scripts/limits.py --self-test
check "limits" python3 scripts/limits.py
# Formatted as rustfmt.toml says (the fuzz crate is a workspace of its own).
check "cargo fmt" cargo fmt --all --check
check "cargo fmt (fuzz)" cargo fmt --manifest-path fuzz/Cargo.toml --check
# No lint clippy warns of (a lint allowed somewhere says why, where it is allowed): the
# lints are checked as the code builds. clippy-driver compiles the workspace's own crates
# (RUSTC_WORKSPACE_WRAPPER, as `cargo clippy` runs it, but generating code too) and every
# warning, clippy's or the compiler's, is an error: one compilation where a check and a
# build were two (four minutes less on two cores). The fuzz targets are linted the same
# way when scripts/fuzz.sh builds them. A lint, like a build error, stops the run at once.
export RUSTC_WORKSPACE_WRAPPER=clippy-driver RUSTFLAGS="-D warnings"
# The Kubernetes tests (crates/vemu/tests/machines/kubernetes.rs and kubelet.rs) run a
# real cluster: etcd, the API server, scheduler, controller manager, kube-proxy and
# kubelets, one binary built from their Go modules (about ten minutes the first time,
# seconds after: Go's build cache), on vemu's image (scripts/image.sh).
# One build of every target of the workspace, with the features `cargo test --workspace`
# resolves: it makes target/release/vemu-operator too (which the Kubernetes tests run),
# and no dependency is built twice (`-p vemu-operator` or `-p vemu` would resolve other
# features and rebuild tokio, hyper, rustls... — four minutes on two cores).
phase build
cargo build --release --workspace --all-targets
# (-X: the version it tells its clients; Helm checks the chart's kubeVersion with it.)
go build -C deploy/kubernetes/test-apiserver -buildvcs=false -o "$PWD/target/vemu-test-apiserver" \
    -ldflags "-X k8s.io/component-base/version.gitVersion=v1.34.4 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34" .
phase tests
check "cargo test" cargo test --workspace --release --no-fail-fast "$@"
# The link semantics once more with every direction on the engine's path (unimpaired
# ones otherwise go by the kernel fast path).
phase tests without the fast path
check "cargo test (no fast path)" env VEMU_FAST_PATH=off cargo test --workspace --release --no-fail-fast --test labs "$@" -- chain tcp_goodput loss runtime_link captures stats
phase python tests
check "pytest" env VEMU="$PWD/target/release/vemu" python3 -m pytest -q python/tests web/tests deploy/kubernetes deploy/helm
# Coverage-guided fuzzing of what vemu reads from outside (fuzz/; docs/security.md).
phase fuzzing
check "fuzzing" scripts/fuzz.sh "${VEMU_FUZZ_SECONDS:-20}"
phase done
if [ "${#failed[@]}" -gt 0 ]; then
    printf 'FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
