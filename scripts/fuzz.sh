#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer) of what vemu reads from outside:
# scenario files, ns-2 traces, GraphML topologies, frames into the data-path core, GSO metadata, datagrams
# from other machines, the API's request bodies (fuzz/fuzz_targets/). Each target runs
# SECONDS (default 30) from its seeds (fuzz/seeds/TARGET, and examples/ for scenarios)
# plus the corpus grown by earlier runs (target/fuzz-corpus/TARGET, kept between runs).
# A crash, a leak-free memory blow-up (> 2 GiB) or an input taking over 10 s fails the
# run and leaves the input in fuzz/artifacts/TARGET/; reproduce it with
#   (cd fuzz && cargo fuzz run -s none TARGET artifacts/TARGET/crash-...)
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
. "$(dirname "$0")/../scripts/setup.sh"
seconds="${1:-30}"
shift || true
# 0 skips fuzzing (libFuzzer would take -max_total_time=0 as "run for ever").
if [ "$seconds" = 0 ]; then
    echo "fuzz: skipped (0 seconds)"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "setup: installing cargo-fuzz"
    cargo install -q --locked cargo-fuzz --version 0.13.2
fi
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(scenario ns2 delay_file graphml frames gso tunnel api_bodies agent_channel)
cd fuzz
# No sanitizer: safe Rust needs none, and it builds on stable. Debug assertions and
# overflow checks are on (cargo-fuzz's default), so arithmetic that overflows fails.
# (Run by scripts/test.sh, the targets are linted as they build: its RUSTC_WORKSPACE_WRAPPER.)
cargo fuzz build -s none
top="$(cd .. && pwd)"
for t in "${targets[@]}"; do
    corpus="$top/target/fuzz-corpus/$t"
    mkdir -p "$corpus"
    seeds=()
    [ -d "seeds/$t" ] && seeds+=("$top/fuzz/seeds/$t")
    [ "$t" = scenario ] && seeds+=("$top/examples")
    echo "fuzz: $t for ${seconds} s"
    if ! cargo fuzz run -s none "$t" "$corpus" "${seeds[@]}" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=70000 \
        -print_final_stats=1 >"$top/target/fuzz-$t.log" 2>&1; then
        tail -n 40 "$top/target/fuzz-$t.log" >&2
        echo "fuzz: $t FAILED; input saved in fuzz/artifacts/$t/ (log: target/fuzz-$t.log)" >&2
        exit 1
    fi
    grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$top/target/fuzz-$t.log" | tr '\n' ' ' | sed "s/^/fuzz: $t ok: /"
    echo
done
