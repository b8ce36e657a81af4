#!/usr/bin/env bash
# Run every test: unit tests of the sans-IO cores, integration tests with real
# namespaces, ping, iperf3 and routing daemons (these need root), and the Python
# client's tests against real labs. Installs what is missing first.
set -euo pipefail
. "$(dirname "$0")/../scripts/setup.sh"
# No dependency cycle between the modules of a crate (docs/design.md, "Crate map").
python3 scripts/module_cycles.py --self-test
python3 scripts/module_cycles.py
# Formatted as rustfmt.toml says (the fuzz crate is a workspace of its own).
cargo fmt --all --check
(cd fuzz && cargo fmt --check)
# No lint clippy warns of (a lint allowed somewhere says why, where it is allowed).
cargo clippy --workspace --all-targets --release -- -D warnings
(cd fuzz && cargo clippy --all-targets --release -- -D warnings)
# The Kubernetes tests (crates/vemu/tests/machines/kubernetes.rs and kubelet.rs) run a
# real cluster: etcd, the API server, scheduler, controller manager, kube-proxy and
# kubelets, one binary built from their Go modules (about ten minutes the first time,
# seconds after: Go's build cache), on vemu's image (scripts/image.sh).
cargo build --release -p vemu-operator
# (-X: the version it tells its clients; Helm checks the chart's kubeVersion with it.)
go build -C deploy/kubernetes/test-apiserver -buildvcs=false -o "$PWD/target/vemu-test-apiserver" \
    -ldflags "-X k8s.io/component-base/version.gitVersion=v1.34.4 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34" .
cargo test --workspace --release "$@"
# The link semantics once more with every direction on the engine's path (unimpaired
# ones otherwise go by the kernel fast path).
VEMU_FAST_PATH=off cargo test --release -p vemu --test labs "$@" -- chain tcp_goodput loss runtime_link captures stats
VEMU="$PWD/target/release/vemu" python3 -m pytest -q python/tests web/tests deploy/kubernetes deploy/helm
# Coverage-guided fuzzing of what vemu reads from outside (fuzz/; docs/security.md).
scripts/fuzz.sh "${VEMU_FUZZ_SECONDS:-30}"
