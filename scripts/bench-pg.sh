#!/usr/bin/env bash
# The PostgreSQL store at scale (tests/bin/bench_pg.rs): 1,000,000 memories over 1,000
# NPCs, 1536-dim vectors from the hashing embedder. Insert throughput, backfill
# throughput with 1 and 4 workers (HNSW index maintained) and as a bulk load (index
# dropped, then rebuilt), per-NPC top-5 recall latency on the exact path and the HNSW
# iterative-scan path, and the HNSW path's recall@5 against exact search.
#
#   scripts/bench-pg.sh [--memories N] [--npcs N] [--queries N] [--sample N]
#
# Uses DATABASE_URL if set, else a throwaway cluster from scripts/pg.sh (needs ~16 GB of
# free disk for 1M memories). Writes target/bench-pg.json. About 30-60 minutes for 1M on
# 2 cores, most of it building the HNSW index.
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
