#!/usr/bin/env bash
# Measures the LLM path against the mock OpenAI-compatible server (tests/bin/mock_openai.rs):
#
#   1. LLM-bound ticks: 256 NPCs, max_concurrency 32, 200 ms per answer. The floor is
#      ceil(256/32) x 200 ms = 1.6 s per tick; prints mean tick time / floor.
#   2. Embedding throughput: 1,024 distinct memories embedded by the backfill worker at
#      100 ms per request, for batch sizes 1, 16 and 64 (and 1 vs 4 requests in flight;
#      batch 1 with 1 in flight would take 100 s and is left out).
#
#   scripts/bench-llm.sh            # release build; takes about a minute after the build
#
# Writes the embedding figures (with the commit measured) between `embed:begin` and
# `embed:end` in docs/BENCHMARKS.md; the LLM-bound ticks are the harness's P1 and only
# printed here.
#
# Everything runs on 127.0.0.1; the mock is started and killed by this script.
set -euo pipefail
cd "$(dirname "$0")/.."
# The commit measured, named before anything is built.
commit=$(scripts/docblock.py commit)

cargo build --release -q -p hearsay -p hearsay-tests --bin hearsay --bin mock-openai
BIN=target/release
work=$(mktemp -d)
mock_pid=""
cleanup() {
    if [[ -n "$mock_pid" ]]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

"$BIN/mock-openai" --latency-ms 200 --embed-latency-ms 100 --dims 384 > "$work/mock.out" &
mock_pid=$!
for _ in $(seq 100); do grep -q '^url ' "$work/mock.out" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's/^url //p' "$work/mock.out")
[[ -n "$url" ]] || { echo "bench-llm: the mock did not start" >&2; exit 1; }

python3 - "$url" "$work" <<'PY'
import sys
url, work = sys.argv[1], sys.argv[2]
def npcs(n, w, memories=0):
    out = []
    for i in range(n):
        mem = ""
        if memories:
            items = ", ".join(f'{{ content = "Memory {j} of npc {i}: the {j}th thing npc {i} learned about item {i * 1000 + j}.", importance = 5 }}' for j in range(memories))
            mem = f"\nmemories = [{items}]"
        out.append(f'[[npcs]]\nname = "npc{i}"\nat = [{(i * 7) % w}, {(i * 13) % w}]{mem}\n')
    return "\n".join(out)
head = 'seed = 1\n\n[world]\nwidth = 64\nheight = 64\nhearing_radius = 3\n\n'
with open(f"{work}/p1.toml", "w") as f:
    f.write(f'name = "bench-llm-ticks"\nticks = 5\n{head}[brain]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "mock"\nmax_concurrency = 32\n\n' + npcs(256, 64))
for batch, conc in ((1, 4), (16, 1), (16, 4), (64, 1), (64, 4)):
        with open(f"{work}/embed-{batch}-{conc}.toml", "w") as f:
            f.write(f'name = "bench-embed"\nticks = 1\n{head}' + npcs(64, 64, memories=16) +
                    f'\n[memory]\nvisibility = "barrier"\n\n[memory.embedder]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "mock-embed"\n'
                    f'batch_size = {batch}\nmax_concurrency = {conc}\n')
PY

summary() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }

echo "== 1. LLM-bound ticks: 256 NPCs, max_concurrency 32, 200 ms per answer"
for run in 1 2 3; do
    "$BIN/hearsay" run "$work/p1.toml" --out "$work/p1-$run" --no-progress > /dev/null
    summary "$work/p1-$run/summary.json" \
        "'run $run: mean tick %.3f s, floor 1.600 s, ratio %.3f; brain p50 %.0f ms p95 %.0f ms' % (1/s['timing']['ticks_per_second'], 1/s['timing']['ticks_per_second']/1.6, s['brains']['default']['latency_ms_p50'], s['brains']['default']['latency_ms_p95'])"
done

echo "== 2. Embedding throughput: 1,024 memories, 100 ms per request"
for combo in "1 4" "16 1" "16 4" "64 1" "64 4"; do
    read -r batch conc <<< "$combo"
    "$BIN/hearsay" run "$work/embed-$batch-$conc.toml" --out "$work/e-$batch-$conc" --no-progress > /dev/null
done
python3 - "$work" "$commit" <<'PY'
import sys; sys.path.insert(0, "scripts"); from docblock import header, write
import json
work, commit = sys.argv[1], sys.argv[2]
md = [header("scripts/bench-llm.sh", commit), "",
      "| batch size | requests in flight | wait for the 1,024 seeds (s) | texts/s | memories embedded by the run's end, of all it made |", "|---|---|---|---|---|"]
for batch, conc in ((1, 4), (16, 1), (16, 4), (64, 1), (64, 4)):
    s = json.load(open(f"{work}/e-{batch}-{conc}/summary.json"))
    embedded = s["memories"]["total"] - s["memories"]["unembedded"]
    # Evidence that the backfill did the work: every memory embedded, by the mock's model.
    if s["memories"]["unembedded"] or embedded < 1024:
        raise SystemExit(f"bench-llm: batch {batch}, {conc} in flight: {embedded} embedded, "
                         f"{s['memories']['unembedded']} left; the figure would not measure the backfill")
    wait = s["timing"]["phases_ms"]["barrier"] / 1000
    line = f"| {batch} | {conc} | {wait:.2f} | {1024 / wait:,.1f} | {embedded:,} of {s['memories']['total']:,} |"
    print(line.replace("|", " ").strip())
    md.append(line)
write("embed", "\n".join(md))
PY
