#!/usr/bin/env bash
# The PostgreSQL store at scale (tests/bin/bench_pg.rs): 1,000,000 memories over 1,000
# NPCs, plus 2 NPCs of 25,000 memories (past `exact_scan_max`, so their recall takes the
# HNSW path), 1536-dim vectors from the hashing embedder. Insert throughput, backfill
# throughput with 1 and 4 workers (HNSW index maintained) and as a bulk load (index
# dropped, then rebuilt); per-NPC top-5 recall latency and recall@5 against a brute force
# on every path — the exact path, the HNSW path for the big NPCs, an exact scan of the
# same big NPCs — with each path's plan printed and checked for the index its figure
# names (an HNSW figure whose plan did not use the HNSW index is not published).
#
#   scripts/bench-pg.sh [--memories N] [--npcs N] [--queries N] [--sample N]
#                       [--heavy N] [--heavy-memories N] [--heavy-queries N]
#
# Uses DATABASE_URL if set, else a throwaway cluster from scripts/pg.sh (needs ~16 GB of
# free disk for 1M memories). Writes target/bench-pg.json. Most of its time is the HNSW
# index's build, which it prints. `scripts/bench.sh p4` runs it for the harness's table.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -q -p hearsay-tests --bin bench-pg
work=$(mktemp -d)
cleanup() {
    if [[ -f "$work/pg.env" ]]; then scripts/pg.sh stop "$work/pg.env" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
if [[ -z "${DATABASE_URL:-}" ]]; then
    scripts/pg.sh install
    scripts/pg.sh start "$work/pg.env"
    set -a
    # shellcheck disable=SC1091
    . "$work/pg.env"
    set +a
fi
target/release/bench-pg --database-url "$DATABASE_URL" --json target/bench-pg.json "$@"
