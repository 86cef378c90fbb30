#!/usr/bin/env bash
# What watching a run costs: report.html for the 200-NPC town (size, and the time to
# read its event log and draw it; median of RUNS), and sweep throughput (runs per minute)
# over SEEDS seeds of fish-market with 1 and with 2 jobs.
#
#   scripts/bench-report.sh        # release build; RUNS=5, SEEDS=1..20 by default
#
# With the defaults it writes its figures (with the commit measured) between
# `report:begin` and `report:end` in docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# The logs are read with the zstd command (installed if missing).
scripts/zstd-cli.sh >/dev/null
RUNS=${RUNS:-5}
SEEDS=${SEEDS:-1..20}
# The commit measured, named before anything is built.
commit=$(scripts/docblock.py commit)

cargo build --release -q -p hearsay
BIN=target/release/hearsay
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$BIN" run scenarios/rumour-200.toml --out "$work/town" --no-progress > /dev/null
zstd -dcq "$work/town/events.jsonl.zst" | wc -c > "$work/events.bytes"
for i in $(seq "$RUNS"); do
    "$BIN" report "$work/town" --out "$work/report-$i.html"
done > "$work/reports.txt"

for jobs in 1 2; do
    "$BIN" sweep scenarios/fish-market.toml --seeds "$SEEDS" --jobs "$jobs" --out "$work/sweep-$jobs" \
        --no-progress > "$work/table-$jobs.txt" 2> "$work/timing-$jobs.txt"
done
same=no
if cmp -s "$work/table-1.txt" "$work/table-2.txt"; then same=yes; fi

python3 - "$work" "$commit" "$SEEDS" "$same" <<'PY'
import sys; sys.path.insert(0, "scripts"); from docblock import header, write
import os, re, statistics
work, commit, seeds, same = sys.argv[1:]
lines = open(f"{work}/reports.txt").read().splitlines()
kb = [int(re.search(r"\((\d+) KB", l).group(1)) for l in lines]
s = [float(re.search(r"in ([0-9.]+) s", l).group(1)) for l in lines]
events = int(open(f"{work}/events.bytes").read())
written = os.path.getsize(f"{work}/report-1.html")
def sweep(jobs):
    said = open(f"{work}/timing-{jobs}.txt").read().strip().splitlines()[-1]
    m = re.search(r"(\d+) runs in ([0-9.]+) s with (\d+) jobs?: ([0-9.]+) runs per minute", said)
    if not m:
        raise SystemExit(f"bench-report: the sweep with {jobs} jobs said {said!r}")
    return int(m.group(1)), float(m.group(2)), float(m.group(4))
(n1, s1, r1), (n2, s2, r2) = sweep(1), sweep(2)
md = [header("scripts/bench-report.sh", commit), "",
      "| figure | value |", "|---|---|",
      f"| `report.html` of `rumour-200.toml` (200 NPCs, 300 ticks) | {kb[0]:,} KB ({written:,} bytes on disk), drawn from a "
      f"{events / 1e6:.1f} MB `events.jsonl` |",
      f"| `hearsay report` on it, median of {len(s)} | {statistics.median(s):.2f} s (min {min(s):.2f}, max {max(s):.2f}), "
      f"reading the log and verifying its hash chain included |",
      f"| `hearsay sweep fish-market --seeds {seeds} --jobs 1` | {s1:.1f} s for {n1} runs: {r1:.0f} runs per minute |",
      f"| the same with `--jobs 2` | {s2:.1f} s for {n2} runs: {r2:.0f} runs per minute ({r2 / r1:.2f}× on 2 cores) |",
      f"| the two sweeps' tables | {'identical' if same == 'yes' else '**different**'} |"]
print("\n".join(md))
if same != "yes":
    raise SystemExit("bench-report: the sweeps' tables differ")
if len(s) == 5 and seeds == "1..20":
    write("report", "\n".join(md))
PY
