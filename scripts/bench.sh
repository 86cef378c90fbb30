#!/usr/bin/env bash
# Regenerates the limits table at the top of docs/BENCHMARKS.md and the README's
# performance block: builds the release binaries, runs every suite of the benchmark
# harness (tests/bin/bench.rs) — memory bandwidth, recall's scan alone, P1 LLM-bound
# ticks, P2 backfill isolation in an LLM-bound run, P3 1,000 NPCs x 500 ticks (with Mesa
# at the same size, the run directory's bytes and the checkpoints' cost), 10,000 and
# 100,000 NPCs, peak RSS, the Mesa peer, P4 PostgreSQL at 1,000,000 memories and the
# 200-NPC town on PostgreSQL against SQLite, a sweep's throughput with one and two
# shard processes against one PostgreSQL, on a throwaway cluster — and renders the
# figures next to docs/bench/before.json (the engine before the last round of
# optimisations). About 50 minutes on 2 cores; BENCH_QUICK=1 runs short versions.
# Every figure is saved with the commit of the binary that measured it.
#
#   scripts/bench.sh                    # everything, into docs/bench/after.json
#   scripts/bench.sh p3 mesa            # some suites (the others keep their last figures)
#   scripts/bench.sh --before REV [...] # the same suites for commit REV, built in a
#                                       # worktree of its own, into docs/bench/before.json
set -euo pipefail
cd "$(dirname "$0")/.."

before=""
if [[ "${1:-}" == "--before" ]]; then
    before="${2:?--before REV}"
    shift 2
fi

cargo build --release -q -p hearsay -p hearsay-tests --bin hearsay --bin bench --bin bench-pg
work=$(mktemp -d)
cleanup() {
    if [[ -f "$work/pg.env" ]]; then scripts/pg.sh stop "$work/pg.env" || true; fi
    if [[ -n "$before" && -d "$work/before" ]]; then git worktree remove --force "$work/before" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

hearsay=target/release/hearsay
out=docs/bench/after.json
if [[ -n "$before" ]]; then
    git worktree add -q --detach "$work/before" "$before"
    (cd "$work/before" && CARGO_TARGET_DIR="$work/before/target" \
        cargo build --release -q -p hearsay -p hearsay-tests --bin hearsay --bin bench-pg)
    hearsay="$work/before/target/release/hearsay"
    out=docs/bench/before.json
fi

suites=("$@")
if [[ ${#suites[@]} -eq 0 ]]; then suites=(bandwidth recall p1 p2 p3 rss mesa pgtown scaleout p4 p10k p100k); fi
if [[ ( " ${suites[*]} " == *" p4 "* || " ${suites[*]} " == *" pgtown "* || " ${suites[*]} " == *" scaleout "* ) && -z "${DATABASE_URL:-}" ]]; then
    scripts/pg.sh install
    scripts/pg.sh start "$work/pg.env"
    set -a
    # shellcheck disable=SC1091
    . "$work/pg.env"
    set +a
fi
quick=()
if [[ -n "${BENCH_QUICK:-}" ]]; then quick=(--quick); fi
target/release/bench --hearsay "$hearsay" --out "$out" "${quick[@]}" "${suites[@]}"
target/release/bench render --before docs/bench/before.json --after docs/bench/after.json \
    --into docs/BENCHMARKS.md --readme README.md --pairs docs/bench/pairs.json
