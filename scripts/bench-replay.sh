#!/usr/bin/env bash
# Replay and checkpoint figures:
#
#   1. Replay speed: an LLM-backed run against the mock OpenAI-compatible server at a
#      fixed 200 ms per answer (32 NPCs, 20 ticks, max_concurrency 32, every NPC thinking
#      every tick: `think = "every_tick"`, so the run waits on the model), then
#      `hearsay replay` of it (offline, from the tape): wall time of each and the ratio.
#   2. Replay of a town with no brain latency to save: scenarios/rumour-200.toml for 60
#      ticks, run and replayed 3 times (interleaved): medians and the ratio.
#   3. Checkpoint overhead: scenarios/rumour-200.toml (200 NPCs, 300 ticks) with a
#      checkpoint after every tick against none at all, 3 runs each (interleaved): median
#      tick time and the ratio.
#
#   4. Resume and fork of big towns and of a long run: the harness's 10,000-NPC town for
#      40 ticks, its 100,000-NPC town for 20 and its 1,000-NPC town (P3's) for 2,000, each
#      run whole; run again and killed (`kill -9`) once it has done 36 (17, 1,800) ticks,
#      then `hearsay resume`; and `hearsay fork` of the whole run at tick 30 (10, 1,990):
#      wall time and peak RSS of each, beside the whole run's. The resumed and the forked
#      run must have the whole run's event log, byte for byte. Then the whole run read
#      back: `hearsay export` (its events table must hold every line of the log) and
#      `hearsay inspect` of one NPC, wall time and peak RSS. A late resume or fork of a
#      long run pays for what it reads back (the store, the logs) more than for the ticks
#      it runs.
#
#   scripts/bench-replay.sh      # release build; a few minutes
#
# Every replay must say its run was reproduced ("identical: N ticks"), and every run's
# summary.json must count the checkpoints it wrote, or the script stops. Writes the figures
# (with the commit measured) between `replay:begin` and `replay:end` in docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# The commit measured, named before anything is built.
commit=$(scripts/docblock.py commit)

cargo build --release -q -p hearsay -p hearsay-tests --bin hearsay --bin mock-openai --bin bench
BIN=target/release
work=$(mktemp -d)
mock_pid=""
cleanup() {
    if [[ -n "$mock_pid" ]]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$BIN/mock-openai" --latency-ms 200 > "$work/mock.out" &
mock_pid=$!
for _ in $(seq 100); do grep -q '^url ' "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's/^url //p' "$work/mock.out")
[[ -n "$url" ]] || { echo "bench-replay: the mock did not start" >&2; exit 1; }

python3 - "$url" "$work" <<'PY'
import sys
url, work = sys.argv[1], sys.argv[2]
npcs = "\n".join(f'[[npcs]]\nname = "npc{i}"\nat = [{(i * 7) % 32}, {(i * 13) % 32}]\n' for i in range(32))
open(f"{work}/llm.toml", "w").write(
    f'name = "bench-replay"\nseed = 1\nticks = 20\n\n[world]\nwidth = 32\nheight = 32\nhearing_radius = 3\n\n'
    f'[brain]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "mock"\nmax_concurrency = 32\nthink = "every_tick"\n\n{npcs}')
rumour = open("scenarios/rumour-200.toml").read()
open(f"{work}/ckpt-1.toml", "w").write(rumour + "\n[run]\ncheckpoint_every = 1\n")
open(f"{work}/ckpt-0.toml", "w").write(rumour + "\n[run]\ncheckpoint_every = 0\n")
PY

# secs OUT CMD...: runs CMD, its stdout to OUT, and prints its wall seconds.
secs() { python3 -c "import time,subprocess,sys; t=time.monotonic(); subprocess.run(sys.argv[2:], check=True, stdout=open(sys.argv[1], 'w')); print(f'{time.monotonic()-t:.3f}')" "$@"; }
# measured OUT CMD...: as secs, and prints its peak RSS in KiB after the seconds.
measured() { python3 -c "import time,subprocess,sys,resource; t=time.monotonic(); subprocess.run(sys.argv[2:], check=True, stdout=open(sys.argv[1], 'w')); print(f'{time.monotonic()-t:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}')" "$@"; }

echo "== 1. replay of an LLM-backed run (200 ms per answer)"
secs /dev/null "$BIN/hearsay" run "$work/llm.toml" --out "$work/llm-run" --no-progress > "$work/llm-run.s"
secs "$work/llm-replay.out" "$BIN/hearsay" replay "$work/llm-run" > "$work/llm-replay.s"

echo "== 2. replay of the 200-NPC town, 60 ticks (3 of each, interleaved)"
for i in 1 2 3; do
    secs /dev/null "$BIN/hearsay" run scenarios/rumour-200.toml --ticks 60 --out "$work/town-$i" --no-progress > "$work/town-run-$i.s"
    secs "$work/town-replay-$i.out" "$BIN/hearsay" replay "$work/town-$i" > "$work/town-replay-$i.s"
done

echo "== 3. checkpoint after every tick vs none (rumour-200, 300 ticks, 3 runs each, interleaved)"
for i in 1 2 3; do
    for every in 1 0; do
        "$BIN/hearsay" run "$work/ckpt-$every.toml" --out "$work/c$every-$i" --no-progress > /dev/null
        # The stores are large and only the summaries are read.
        rm -f "$work/c$every-$i/memories.db"*
    done
done

echo "== 4. resume and fork of the 10,000-NPC and the 100,000-NPC towns, and of 1,000 NPCs x 2,000 ticks"
scripts/zstd-cli.sh > /dev/null
# big NPCS TICKS KILL_AT FORK_AT
big() {
    local n=$1 ticks=$2 kill_at=$3 fork_at=$4 b="$work/big$1"
    # As the harness runs it: past 20,000 NPCs, ten listeners at most per talk.
    "$BIN/bench" town "$n" "$ticks" | if (( n > 20000 )); then
        sed 's/^sight_radius = 6$/sight_radius = 6\nmax_listeners = 10/'
    else cat; fi > "$b.toml"
    secs /dev/null "$BIN/hearsay" run "$b.toml" --out "$b-run" --no-progress > "$b-run.s"
    python3 - "$BIN/hearsay" "$b" "$kill_at" <<'PY'
# Runs the town again and kills it (SIGKILL) once it reports KILL_AT ticks done.
import subprocess, sys
hearsay, b, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = subprocess.Popen([hearsay, "run", f"{b}.toml", "--out", f"{b}-killed", "--progress-lines"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
done = 0
for line in p.stderr:
    if line.startswith("hearsay-progress "):
        done = int(line.split()[1])
        if done >= kill_at:
            break
p.kill()
p.wait()
if done < kill_at:
    raise SystemExit(f"bench-replay: the run to kill ended at {done} ticks")
PY
    secs "$b-resume.out" "$BIN/hearsay" resume "$b-killed" --no-progress > "$b-resume.s"
    secs "$b-fork.out" "$BIN/hearsay" fork "$b-run" --at-tick "$fork_at" --out "$b-fork" --no-progress > "$b-fork.s"
    # The whole run read back: exported as tables, and one NPC inspected.
    measured "$b-export.out" "$BIN/hearsay" export "$b-run" --out "$b-export" > "$b-export.s"
    measured "$b-inspect.out" "$BIN/hearsay" inspect "$b-run" --npc N5 > "$b-inspect.s"
    zstd -dc "$b-run/events.jsonl.zst" | wc -l > "$b-run.lines"
    rm -rf "$b-export"
    for r in run killed fork; do
        zstd -dc "$b-$r/events.jsonl.zst" | md5sum | cut -d' ' -f1 > "$b-$r.md5"
        # Only the summaries are read from here on; the stores are large.
        rm -f "$b-$r"/memories.db* "$b-$r"/*.jsonl.zst
    done
    echo "$n $ticks $kill_at $fork_at" > "$b.args"
}
big 10000 40 36 30
big 100000 20 17 10
big 1000 2000 1800 1990

python3 - "$work" "$commit" <<'PY'
import sys; sys.path.insert(0, "scripts"); from docblock import header, write
import json, statistics
work, commit = sys.argv[1], sys.argv[2]
def secs(name): return float(open(f"{work}/{name}.s").read())
def reproduced(name):
    said = open(f"{work}/{name}.out").read().strip().splitlines()
    if not said or not said[-1].startswith("identical: "):
        raise SystemExit(f"bench-replay: {name} did not reproduce its run: {said[-1:] or 'nothing said'}")
    return said[-1]
llm_run, llm_replay = secs("llm-run"), secs("llm-replay")
llm_said = reproduced("llm-replay")
llm = json.load(open(f"{work}/llm-run/summary.json"))["brains"]["default"]
town_run = statistics.median(secs(f"town-run-{i}") for i in (1, 2, 3))
town_replay = statistics.median(secs(f"town-replay-{i}") for i in (1, 2, 3))
town_said = {reproduced(f"town-replay-{i}") for i in (1, 2, 3)}
def runs(every):
    out = []
    for i in (1, 2, 3):
        t = json.load(open(f"{work}/c{every}-{i}/summary.json"))["timing"]
        out.append((1000 / t["ticks_per_second"], t["checkpoints"]["written"], t["checkpoints"]["bytes"]))
    return out
with_c, without = runs(1), runs(0)
if any(w == 0 for _, w, _ in with_c) or any(w != 0 for _, w, _ in without):
    raise SystemExit(f"bench-replay: checkpoints written {[w for _, w, _ in with_c]} with, {[w for _, w, _ in without]} without")
tick_with, tick_without = statistics.median(m for m, _, _ in with_c), statistics.median(m for m, _, _ in without)
def big(n):
    b = f"big{n}"
    _, ticks, kill_at, fork_at = open(f"{work}/{b}.args").read().split()
    rss = lambda r: json.load(open(f"{work}/{b}-{r}/summary.json"))["timing"]["peak_rss_mib"]
    md5 = {r: open(f"{work}/{b}-{r}.md5").read().strip() for r in ("run", "killed", "fork")}
    if len(set(md5.values())) != 1:
        raise SystemExit(f"bench-replay: the resumed or forked {n}-NPC run's events differ: {md5}")
    said = [l for l in open(f"{work}/{b}-resume.out").read().splitlines() if l.startswith("(continued from tick")]
    whole, resume, fork = secs(f"{b}-run"), secs(f"{b}-resume"), secs(f"{b}-fork")
    def measured(name):
        wall, kib = open(f"{work}/{name}.s").read().split()
        return float(wall), int(kib) / 1024
    export_s, export_mib = measured(f"{b}-export")
    inspect_s, inspect_mib = measured(f"{b}-inspect")
    # What the export said it wrote: `table N rows …`; its events must be every line.
    tables = {l.split()[0]: int(l.split()[1]) for l in open(f"{work}/{b}-export.out") if " rows " in l}
    lines = int(open(f"{work}/{b}-run.lines").read())
    if tables.get("events") != lines:
        raise SystemExit(f"bench-replay: the {n}-NPC export wrote {tables.get('events')} events of {lines} lines")
    shown = sum(1 for l in open(f"{work}/{b}-inspect.out") if l.strip())
    if shown < 2:
        raise SystemExit(f"bench-replay: inspect of the {n}-NPC run showed nothing")
    return [
        f"| the {int(n):,}-NPC town (the harness's), {int(ticks):,} ticks, run whole | {whole:.2f} s, peak RSS {rss('run'):.0f} MiB | |",
        f"| … killed (`kill -9`) after {int(kill_at):,} ticks, then `hearsay resume` | {resume:.2f} s ({resume / whole:.2f} of the whole run's), "
        f"peak RSS {rss('killed'):.0f} MiB ({rss('killed') / rss('run'):.2f} of the whole run's) | {' '.join(said) or 'resumed'}; its events the whole run's, byte for byte |",
        f"| … `hearsay fork` of the whole run at tick {int(fork_at):,} | {fork:.2f} s ({fork / whole:.2f} of the whole run's), peak RSS {rss('fork'):.0f} MiB "
        f"({rss('fork') / rss('run'):.2f} of the whole run's) | its events the whole run's, byte for byte |",
        f"| … `hearsay export` of the whole run (Parquet) | {export_s:.2f} s, peak RSS {export_mib:.0f} MiB ({export_mib / rss('run'):.2f} of the whole run's) "
        f"| {', '.join(f'{t} {r:,}' for t, r in tables.items())} rows; the events every line of the log |",
        f"| … `hearsay inspect` of one NPC (N5) at the end | {inspect_s:.2f} s, peak RSS {inspect_mib:.0f} MiB | {shown:,} lines shown |",
    ]
md = [header("scripts/bench-replay.sh", commit), "",
      "| figure | value | evidence |", "|---|---|---|",
      f"| an LLM-backed run, 32 NPCs × 20 ticks, mock at 200 ms per answer, `max_concurrency = 32`, `think = \"every_tick\"` | {llm_run:.2f} s "
      f"| {llm['calls']:,} calls to the mock |",
      f"| `hearsay replay` of it (offline, from the tape) | {llm_replay:.3f} s: {llm_replay / llm_run:.4f} of the run's time "
      f"({llm_run / llm_replay:.0f}× faster) | replay said \"{llm_said}\" |",
      f"| the 200-NPC town (`rumour-200.toml`), 60 ticks, no brain latency to save: run, median of 3 | {town_run:.2f} s | |",
      f"| its replay, median of 3 | {town_replay:.2f} s: {town_replay / town_run:.2f} of the run's | replay said \"{' / '.join(sorted(town_said))}\" |",
      f"| median tick of the 200-NPC town, 300 ticks, checkpoint after every tick (3 runs) | {tick_with:.1f} ms "
      f"| {with_c[0][1]} checkpoints, {with_c[0][2] / 1e6:.1f} MB of them before compression |",
      f"| the same without checkpoints (`checkpoint_every = 0`, 3 runs, interleaved) | {tick_without:.1f} ms | 0 checkpoints |",
      f"| checkpoint overhead (ratio of the medians) | **{tick_with / tick_without:.2f}** | |"] + big(10000) + big(100000) + big(1000)
print("\n".join(md))
write("replay", "\n".join(md))
PY
