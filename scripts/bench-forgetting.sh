#!/usr/bin/env bash
# What forgetting does to a long run: scenarios/rumour-200.toml (200 NPCs) for 1,000
# ticks, with forgetting off ([memory.forget] threshold = 0) and on (the defaults:
# threshold 0.05, 25 ticks of strength per point of importance), reflection on in both.
# For each: memories archived vs kept, mean recall time per NPC (the store's search), ticks
# per second (medians of RUNS runs), and the share of recalled memories that are relevant
# — that carry one of the town's tracked rumours ([[facts]]) — per quarter of the run.
#
#   scripts/bench-forgetting.sh          # release build; RUNS=3 by default (~15 min)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
TICKS=${TICKS:-1000}

cargo build --release -q -p hearsay
BIN=target/release/hearsay
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp scenarios/rumour-200.toml "$work/on.toml"
{ cat scenarios/rumour-200.toml; printf '\n[memory.forget]\nthreshold = 0\n'; } > "$work/off.toml"

for mode in off on; do
    for i in $(seq "$RUNS"); do
        echo "run $mode $i/$RUNS" >&2
        "$BIN" run "$work/$mode.toml" --ticks "$TICKS" --out "$work/$mode-$i" --no-progress > /dev/null
    done
done

python3 - "$work" "$RUNS" "$TICKS" <<'PY'
import json, statistics, sys, tomllib
work, runs, ticks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
facts = tomllib.load(open("scenarios/rumour-200.toml", "rb"))["facts"]
patterns = [p.lower() for f in facts for p in f["match"]]

def analyse(mode):
    summaries = [json.load(open(f"{work}/{mode}-{i}/summary.json")) for i in range(1, runs + 1)]
    content, quarters = {}, [[0, 0] for _ in range(4)]
    with open(f"{work}/{mode}-1/events.jsonl") as f:
        for line in f:
            e = json.loads(line)
            if e["type"] == "memory":
                content[e["id"]] = e["content"].lower()
            elif e["type"] in ("talk", "move", "stay"):
                q = quarters[min(3, e["tick"] * 4 // ticks)]
                for i in e["recalled"]:
                    q[0] += 1
                    q[1] += any(p in content[i] for p in patterns)
    m = summaries[0]["memories"]
    return {
        "total": m["total"], "archived": m.get("archived", 0), "by_kind": m["by_kind"],
        "recall_us": statistics.median(s["timing"]["recall_us_per_npc"] for s in summaries),
        "tps": statistics.median(s["timing"]["ticks_per_second"] for s in summaries),
        "wall_s": statistics.median(s["timing"]["wall_ms"] for s in summaries) / 1000,
        "share": [r / n if n else 0.0 for n, r in quarters],
        "recalled": sum(n for n, _ in quarters),
    }

off, on = analyse("off"), analyse("on")
print(f"rumour-200, {ticks} ticks, medians of {runs} runs")
print(f"{'':28}{'forgetting off':>16}{'forgetting on':>16}")
print(f"{'memories':28}{off['total']:>16,}{on['total']:>16,}")
print(f"{'  archived':28}{off['archived']:>16,}{on['archived']:>16,}")
print(f"{'  kept (recallable)':28}{off['total'] - off['archived']:>16,}{on['total'] - on['archived']:>16,}")
print(f"{'  reflections':28}{off['by_kind'].get('reflection', 0):>16,}{on['by_kind'].get('reflection', 0):>16,}")
print(f"{'recall per NPC (us)':28}{off['recall_us']:>16.1f}{on['recall_us']:>16.1f}   ratio {on['recall_us'] / off['recall_us']:.3f}")
print(f"{'ticks per second':28}{off['tps']:>16.2f}{on['tps']:>16.2f}")
print(f"{'wall (s)':28}{off['wall_s']:>16.1f}{on['wall_s']:>16.1f}")
for q in range(4):
    lo, hi = q * ticks // 4, (q + 1) * ticks // 4 - 1
    print(f"{f'relevant share, ticks {lo}-{hi}':28}{off['share'][q]:>16.3f}{on['share'][q]:>16.3f}")
print("(relevant: a recalled memory that carries one of the tracked rumours, i.e. matches a [[facts]] pattern)")
PY
