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
# Everything runs on 127.0.0.1; the mock is started and killed by this script.
set -euo pipefail
cd "$(dirname "$0")/.."

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
    {
        "$BIN/hearsay" run "$work/embed-$batch-$conc.toml" --out "$work/e-$batch-$conc" --no-progress > /dev/null
        summary "$work/e-$batch-$conc/summary.json" \
            "'batch %3d, %d in flight: %7.1f texts/s (1024 texts in %.2f s)' % ($batch, $conc, 1024 / (s['timing']['phases_ms']['barrier'] / 1000), s['timing']['phases_ms']['barrier'] / 1000)"
    }
done
