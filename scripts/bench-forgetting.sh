#!/usr/bin/env bash
# What forgetting does to a long run: scenarios/rumour-200.toml (200 NPCs) for 1,000
# ticks, with forgetting off ([memory.forget] threshold = 0) and on (the defaults:
# threshold 0.05, 25 ticks of strength per point of importance), reflection on in both.
# For each: memories archived vs kept, mean recall time per NPC (the store's search), ticks
# per second (medians of RUNS runs), and the share of recalled memories that are relevant
# — that carry one of the town's tracked rumours ([[facts]]) — per quarter of the run.
#
#   scripts/bench-forgetting.sh          # release build; RUNS=3 by default (~15 min)
#
# With the defaults it writes its figures (with the commit measured) between
# `forgetting:begin` and `forgetting:end` in docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# The logs are read with the zstd command (installed if missing).
scripts/zstd-cli.sh >/dev/null
RUNS=${RUNS:-3}
TICKS=${TICKS:-1000}
# The commit measured, named before anything is built.
commit=$(scripts/docblock.py commit)

cargo build --release -q -p hearsay
BIN=target/release/hearsay
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp scenarios/rumour-200.toml "$work/on.toml"
{ cat scenarios/rumour-200.toml; printf '\n[memory.forget]\nthreshold = 0\n'; } > "$work/off.toml"

# Interleaved (off, on, off, on, …) so a busy machine slows both alike.
for i in $(seq "$RUNS"); do
    for mode in off on; do
        echo "run $mode $i/$RUNS" >&2
        "$BIN" run "$work/$mode.toml" --ticks "$TICKS" --out "$work/$mode-$i" --no-progress > /dev/null
        # Keep the disk free: the stores are GBs; summaries and the first event log suffice.
        rm -f "$work/$mode-$i/memories.db"*
        if [[ $i -gt 1 ]]; then rm -f "$work/$mode-$i/events.jsonl.zst" "$work/$mode-$i/llm.jsonl.zst"; fi
    done
done

python3 - "$work" "$RUNS" "$TICKS" "$commit" <<'PY'
import sys; sys.path.insert(0, "scripts"); from runlog import log_bytes, log_lines; from docblock import header, write
import json, statistics, sys, tomllib
work, runs, ticks, commit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
facts = tomllib.load(open("scenarios/rumour-200.toml", "rb"))["facts"]
patterns = [p.lower() for f in facts for p in f["match"]]

def quarter(tick):
    return min(3, tick * 4 // ticks)

def analyse(mode):
    summaries = [json.load(open(f"{work}/{mode}-{i}/summary.json")) for i in range(1, runs + 1)]
    content, made = {}, {}
    for line in log_lines(f"{work}/{mode}-1/events.jsonl"):
        e = json.loads(line)
        if e["type"] == "memory":
            content[e["id"]] = e["content"].lower()
            made[e["id"]] = e["tick"]
    rumour = [[0, 0] for _ in range(4)]
    seen = [[0, 0] for _ in range(4)]
    ages = [[] for _ in range(4)]
    for line in log_lines(f"{work}/{mode}-1/llm.jsonl"):
        c = json.loads(line)
        q = quarter(c["tick"])
        # What the NPC perceives: the names of the NPCs and places in sight.
        terms = [t.lower() for t in c.get("recall_query", "").split(". ")
                 if t and " said: " not in t and len(t) <= 40]
        for i in c["recalled"]:
            text = content[i]
            rumour[q][0] += 1
            rumour[q][1] += any(p in text for p in patterns)
            seen[q][0] += 1
            seen[q][1] += any(t in text for t in terms)
            ages[q].append(c["tick"] - made[i])
    m = summaries[0]["memories"]
    return {
        "total": m["total"], "archived": m.get("archived", 0), "by_kind": m["by_kind"],
        "recall_us": statistics.median(s["timing"]["recall_us_per_npc"] for s in summaries),
        "tps": statistics.median(s["timing"]["ticks_per_second"] for s in summaries),
        "wall_s": statistics.median(s["timing"]["wall_ms"] for s in summaries) / 1000,
        "recalled": [n for n, _ in rumour],
        "rumour": [r / n if n else 0.0 for n, r in rumour],
        "seen": [r / n if n else 0.0 for n, r in seen],
        "age": [statistics.median(a) if a else 0 for a in ages],
    }

off, on = analyse("off"), analyse("on")
# The shares are of what recall returned: a quarter in which nothing was recalled measures nothing.
for mode, a in (("off", off), ("on", on)):
    if min(a["recalled"]) == 0:
        raise SystemExit(f"bench-forgetting: forgetting {mode}: memories recalled per quarter {a['recalled']}")
print(f"rumour-200, {ticks} ticks, medians of {runs} runs")
print(f"{'':34}{'forgetting off':>16}{'forgetting on':>16}")
print(f"{'memories':34}{off['total']:>16,}{on['total']:>16,}")
print(f"{'  archived':34}{off['archived']:>16,}{on['archived']:>16,}")
print(f"{'  kept (recallable)':34}{off['total'] - off['archived']:>16,}{on['total'] - on['archived']:>16,}")
print(f"{'  reflections':34}{off['by_kind'].get('reflection', 0):>16,}{on['by_kind'].get('reflection', 0):>16,}")
print(f"{'recall per NPC (us)':34}{off['recall_us']:>16.1f}{on['recall_us']:>16.1f}   ratio {on['recall_us'] / off['recall_us']:.3f}")
print(f"{'ticks per second':34}{off['tps']:>16.2f}{on['tps']:>16.2f}   ratio {on['tps'] / off['tps']:.3f}")
print(f"{'wall (s)':34}{off['wall_s']:>16.1f}{on['wall_s']:>16.1f}")
for q in range(4):
    lo, hi = q * ticks // 4, (q + 1) * ticks // 4 - 1
    print(f"{f'ticks {lo}-{hi}: carries a rumour':34}{off['rumour'][q]:>16.3f}{on['rumour'][q]:>16.3f}")
    print(f"{f'ticks {lo}-{hi}: names what it sees':34}{off['seen'][q]:>16.3f}{on['seen'][q]:>16.3f}")
    print(f"{f'ticks {lo}-{hi}: median age (ticks)':34}{off['age'][q]:>16.0f}{on['age'][q]:>16.0f}")
print("(shares of recalled memories: 'carries a rumour' matches a [[facts]] pattern; 'names what it sees'")
print(" mentions an NPC or place in the recalling NPC's sight, from the recall query in llm.jsonl)")

md = [header("scripts/bench-forgetting.sh", commit), "",
      f"`rumour-200.toml` for {ticks:,} ticks, medians of {runs} runs of each (interleaved); counts from the first run of each.", "",
      "| | forgetting off | forgetting on |", "|---|---|---|",
      f"| memories written | {off['total']:,} | {on['total']:,} |",
      f"| archived (kept in the store, out of recall) | {off['archived']:,} | {on['archived']:,} ({on['archived'] / on['total']:.0%}) |",
      f"| recallable at the end | {off['total'] - off['archived']:,} | {on['total'] - on['archived']:,} |",
      f"| reflections | {off['by_kind'].get('reflection', 0):,} | {on['by_kind'].get('reflection', 0):,} |",
      f"| recall per NPC (the store's search), median | {off['recall_us']:.1f} µs | {on['recall_us']:.1f} µs (ratio {on['recall_us'] / off['recall_us']:.2f}) |",
      f"| ticks per second, median | {off['tps']:.2f} | {on['tps']:.2f} (ratio {on['tps'] / off['tps']:.2f}) |",
      "", "What recall returned, per quarter of the run (shares of all recalled memories):", "",
      "| ticks | memories recalled, off / on | carries a rumour, off / on | names what it sees, off / on | median age of a recalled memory, off / on |",
      "|---|---|---|---|---|"]
for q in range(4):
    lo, hi = q * ticks // 4, (q + 1) * ticks // 4 - 1
    md.append(f"| {lo}–{hi} | {off['recalled'][q]:,} / {on['recalled'][q]:,} | {off['rumour'][q]:.3f} / {on['rumour'][q]:.3f} | {off['seen'][q]:.3f} / {on['seen'][q]:.3f} | "
              f"{off['age'][q]:.0f} / {on['age'][q]:.0f} |")
if runs == 3 and ticks == 1000:
    write("forgetting", "\n".join(md))
PY
