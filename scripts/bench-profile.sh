#!/usr/bin/env bash
# Where a tick's CPU goes: `perf record` of the harness's towns, folded by thread and by
# stage (scripts/cpu_profile.py), written with the commit measured between `profile:begin`
# and `profile:end` in docs/BENCHMARKS.md, and as JSON to docs/bench/profile.json.
#
#   1. 10,000 NPCs x 60 ticks (`bench town 10000 60`: the p10k suite's town);
#   2. 1,000 NPCs x 300 ticks (`bench town 1000 300`: the P3 suite's town, shorter).
#
#   scripts/bench-profile.sh LABEL    # release build; a few minutes; needs perf
#
# Profiles are kept by label (a round's "what guided this change"), newest first; the
# same label measured again replaces its profile.
#
# perf samples each thread HZ times per second of CPU it uses, with a copy of its stack
# (`--call-graph dwarf`: the release build keeps line tables, not frame pointers). The
# run's own CPU figure (`summary.json`) is printed beside perf's, and the share of stacks
# unwound to their thread's start beside the samples: a profile whose total is far from
# the process's, or whose stacks were cut short, says so in its table. The fold refuses
# a profile in which a stage has no sample (a function renamed).
set -euo pipefail
cd "$(dirname "$0")/.."
label="${1:?usage: scripts/bench-profile.sh LABEL}"
commit=$(scripts/docblock.py commit)
HZ=${HZ:-499}

if ! command -v perf >/dev/null; then
    [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null \
        || { echo "bench-profile: needs perf (as root: apt-get install linux-perf)" >&2; exit 1; }
    echo "bench-profile: installing perf (Debian's linux-perf)" >&2
    apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends linux-perf)
    if ! "${apt[@]}" >/dev/null; then
        echo "bench-profile: install failed; refreshing the package lists once and retrying" >&2
        apt-get update -q >/dev/null
        "${apt[@]}" >/dev/null
    fi
fi
cargo build --release -q -p hearsay -p hearsay-tests --bin hearsay --bin bench
BIN=target/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

towns=("10000 60" "1000 300")
for town in "${towns[@]}"; do
    read -r n ticks <<< "$town"
    name="$n-$ticks"
    echo "== $n NPCs x $ticks ticks under perf record -F $HZ" >&2
    "$BIN/bench" town "$n" "$ticks" > "$work/$name.toml"
    perf record -q -F "$HZ" --call-graph dwarf,32768 -o "$work/$name.data" -- \
        "$BIN/hearsay" run "$work/$name.toml" --out "$work/$name" --no-progress > /dev/null
    perf script -i "$work/$name.data" -F comm,tid,ip,sym --no-inline 2>/dev/null \
        | scripts/cpu_profile.py fold --ticks "$ticks" --hz "$HZ" > "$work/$name.json"
    rm -f "$work/$name.data" "$work/$name/memories.db"*
done

python3 - "$work" "$label" "$commit" "$HZ" "${towns[@]}" <<'PY'
import json, os, sys
sys.path.insert(0, "scripts")
from docblock import write
from cpu_profile import keep, render

work, label, commit, hz, towns = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
profiles = []
for town in towns:
    n, ticks = town.split()
    p = json.load(open(f"{work}/{n}-{ticks}.json"))
    timing = json.load(open(f"{work}/{n}-{ticks}/summary.json"))["timing"]
    p["title"] = f"{int(n):,} NPCs × {ticks} ticks"
    p["run_cpu_ms_per_tick"] = timing["cpu_ms_per_tick"]
    p["ticks_per_second"] = timing["ticks_per_second"]
    p["npcs"] = int(n)
    profiles.append(p)
path = "docs/bench/profile.json"
kept = json.load(open(path))["profiles"] if os.path.exists(path) else []
kept = keep(kept, label, commit, hz, profiles)
with open(path, "w") as f:
    json.dump({"profiles": kept}, f, indent=1)
    f.write("\n")
write("profile", render(kept))
PY
