#!/usr/bin/env bash
# Where a tick's CPU goes: `perf record` of the harness's towns, folded by thread and by
# stage (scripts/cpu_profile.py), written with the commit measured between `profile:begin`
# and `profile:end` in docs/BENCHMARKS.md, and as JSON to docs/bench/profile.json.
#
#   1. 10,000 NPCs x 60 ticks (`bench town 10000 60`: the p10k suite's town);
#   2. 1,000 NPCs x 300 ticks (`bench town 1000 300`: the P3 suite's town, shorter).
#
#   scripts/bench-profile.sh      # release build; a few minutes; needs perf
#
# perf samples each thread HZ times per second of CPU it uses, with a copy of its stack
# (`--call-graph dwarf`: the release build keeps line tables, not frame pointers). The
# run's own CPU figure (`summary.json`) is printed beside perf's, and the share of stacks
# unwound to their thread's start beside the samples: a profile whose total is far from
# the process's, or whose stacks were cut short, says so in its table. The fold refuses
# a profile in which a stage has no sample (a function renamed).
set -euo pipefail
cd "$(dirname "$0")/.."
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

python3 - "$work" "$commit" "$HZ" "${towns[@]}" <<'PY'
import json, sys
sys.path.insert(0, "scripts")
from docblock import header, write
from cpu_profile import own_table, table

work, commit, hz, towns = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
profiles = []
for town in towns:
    n, ticks = town.split()
    p = json.load(open(f"{work}/{n}-{ticks}.json"))
    timing = json.load(open(f"{work}/{n}-{ticks}/summary.json"))["timing"]
    p["title"] = f"{int(n):,} NPCs × {ticks} ticks"
    p["run_cpu_ms_per_tick"] = timing["cpu_ms_per_tick"]
    p["ticks_per_second"] = timing["ticks_per_second"]
    p["npcs"], p["commit"] = int(n), commit
    profiles.append(p)
json.dump(profiles, open("docs/bench/profile.json", "w"), indent=1)
text = [
    header("scripts/bench-profile.sh", commit),
    "",
    f"`perf record -F {hz} --call-graph dwarf` of `hearsay run` of each town (`bench town N TICKS`), "
    "folded by `scripts/cpu_profile.py`. A stage's figure is inclusive (the function and all it calls); "
    "per tick means over the run's ticks, its start and end included. perf slows what it samples, so "
    "read the shares, not the speed.",
    "",
    table(profiles),
]
for p in profiles:
    text += ["", f"Where the samples landed, {p['title']}:", "", own_table(p)]
write("profile", "\n".join(text))
PY
