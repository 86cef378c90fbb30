#!/usr/bin/env bash
# Regenerates the limits table at the top of docs/BENCHMARKS.md: builds the release
# binaries, runs every suite of the benchmark harness (tests/bin/bench.rs) — memory
# bandwidth, recall's scan alone, P1 LLM-bound ticks, P2 backfill isolation, P3 1,000 NPCs x 500 ticks, peak RSS,
# the Mesa peer, and P4 PostgreSQL at 1,000,000 memories on a throwaway cluster — and
# renders the figures next to docs/bench/before.json (the engine before the last round of
# optimisations). About 25 minutes on 2 cores; BENCH_QUICK=1 runs short versions.
#
#   scripts/bench.sh                # everything
#   scripts/bench.sh p3 mesa        # some suites (the others keep their last figures)
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -q -p hearsay -p hearsay-tests --bin hearsay --bin bench --bin bench-pg
work=$(mktemp -d)
cleanup() {
    if [[ -f "$work/pg.env" ]]; then scripts/pg.sh stop "$work/pg.env" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

suites=("$@")
if [[ ${#suites[@]} -eq 0 ]]; then suites=(bandwidth recall p1 p2 p3 rss mesa p4); fi
if [[ " ${suites[*]} " == *" p4 "* && -z "${DATABASE_URL:-}" ]]; then
    scripts/pg.sh install
    scripts/pg.sh start "$work/pg.env"
    set -a
    # shellcheck disable=SC1091
    . "$work/pg.env"
    set +a
fi
quick=()
if [[ -n "${BENCH_QUICK:-}" ]]; then quick=(--quick); fi
target/release/bench --out target/bench/results.json "${quick[@]}" "${suites[@]}"
target/release/bench render --before docs/bench/before.json --after target/bench/results.json \
    --into docs/BENCHMARKS.md
