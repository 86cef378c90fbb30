#!/usr/bin/env bash
# What watching a run costs: report.html for the 200-NPC town (size, and the time to
# read its event log and draw it; median of RUNS), and sweep throughput (runs per minute)
# over SEEDS seeds of fish-market with 1 and with 2 jobs.
#
#   scripts/bench-report.sh        # release build; RUNS=5, SEEDS=1..20 by default
set -euo pipefail
cd "$(dirname "$0")/.."
# The logs are read with the zstd command (installed if missing).
scripts/zstd-cli.sh >/dev/null
RUNS=${RUNS:-5}
SEEDS=${SEEDS:-1..20}

cargo build --release -q -p hearsay
BIN=target/release/hearsay
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$BIN" run scenarios/rumour-200.toml --out "$work/town" --no-progress > /dev/null
events=$(zstd -dcq "$work/town/events.jsonl.zst" | wc -c)
for i in $(seq "$RUNS"); do
    "$BIN" report "$work/town" --out "$work/report-$i.html"
done | python3 -c '
import re, statistics, sys
lines = sys.stdin.read().splitlines()
kb = [int(re.search(r"\((\d+) KB", l).group(1)) for l in lines]
s = [float(re.search(r"in ([0-9.]+) s", l).group(1)) for l in lines]
events = int(sys.argv[1])
print(f"report, rumour-200 (300 ticks, 200 NPCs): {kb[0]} KB from a {events / 1e6:.1f} MB event log; "
      f"median {statistics.median(s):.2f} s over {len(s)} runs (min {min(s):.2f}, max {max(s):.2f})")
' "$events"

for jobs in 1 2; do
    "$BIN" sweep scenarios/fish-market.toml --seeds "$SEEDS" --jobs "$jobs" --out "$work/sweep-$jobs" \
        --no-progress > "$work/table-$jobs.txt" 2> "$work/timing-$jobs.txt"
    echo "sweep fish-market --seeds $SEEDS --jobs $jobs: $(tail -1 "$work/timing-$jobs.txt")"
done
if cmp -s "$work/table-1.txt" "$work/table-2.txt"; then
    echo "the two sweeps print the same table"
else
    echo "the sweeps' tables differ" >&2
    exit 1
fi
