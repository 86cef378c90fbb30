#!/usr/bin/env bash
# Replay and checkpoint figures:
#
#   1. Replay speed: an LLM-backed run against the mock OpenAI-compatible server at a
#      fixed 200 ms per answer (32 NPCs, 20 ticks, max_concurrency 32), then
#      `hearsay replay` of it (offline, from the tape): wall time of each and the ratio.
#   2. Checkpoint overhead: scenarios/rumour-200.toml (200 NPCs, 300 ticks) with a
#      checkpoint after every tick against none at all, 3 runs each: median tick time
#      and the ratio.
#
#   scripts/bench-replay.sh      # release build; a few minutes
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
    f'[brain]\nprovider = "openai"\nbase_url = "{url}"\nmodel = "mock"\nmax_concurrency = 32\n\n{npcs}')
rumour = open("scenarios/rumour-200.toml").read()
open(f"{work}/ckpt-1.toml", "w").write(rumour)
open(f"{work}/ckpt-0.toml", "w").write(rumour + "\n[run]\ncheckpoint_every = 0\n")
PY

secs() { python3 -c "import time,subprocess,sys; t=time.monotonic(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); print(f'{time.monotonic()-t:.3f}')" "$@"; }

echo "== 1. replay of an LLM-backed run (200 ms per answer)"
run_s=$(secs "$BIN/hearsay" run "$work/llm.toml" --out "$work/llm-run" --no-progress)
replay_s=$(secs "$BIN/hearsay" replay "$work/llm-run")
python3 -c "import sys; r, p = float(sys.argv[1]), float(sys.argv[2]); print(f'run {r:.2f} s, replay {p:.3f} s: replay takes {p / r:.4f} of the run ({r / p:.0f}x faster)')" "$run_s" "$replay_s"

echo "== 2. checkpoint after every tick vs none (rumour-200, 300 ticks, 3 runs each)"
for every in 1 0; do
    for i in 1 2 3; do
        "$BIN/hearsay" run "$work/ckpt-$every.toml" --out "$work/c$every-$i" --no-progress > /dev/null
    done
done
python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
def tick_ms(every):
    return statistics.median(1000 / json.load(open(f"{work}/c{every}-{i}/summary.json"))["timing"]["ticks_per_second"] for i in (1, 2, 3))
with_c, without = tick_ms(1), tick_ms(0)
print(f"median tick: {with_c:.1f} ms with a checkpoint per tick, {without:.1f} ms without: ratio {with_c / without:.3f}")
PY
