#!/usr/bin/env bash
# What every shipped scenario's run writes, as digests: proof that a restructuring changed
# no behaviour. Runs scenarios/fish-market.toml, fish-market-zh.toml,
# forgetful-village.toml and rumour-200.toml as shipped (offline), and
# fish-market-llm.toml against the mock OpenAI server (tests/bin/mock_openai.rs; barrier
# visibility, so recall does not depend on timing), then prints one line per file:
# blake2b of events.jsonl, of llm.jsonl and of summary.json, the last two without what
# the wall clock or the machine decides (latencies, timings, the run directory's path,
# the mock's URL in the per-replica figures).
#
#   scripts/snapshot-runs.sh > before.txt      # on the commit before
#   scripts/snapshot-runs.sh > after.txt       # on the commit after; diff them
set -euo pipefail
cd "$(dirname "$0")/.."
# The logs are read with the zstd command (installed if missing).
scripts/zstd-cli.sh >/dev/null

# HEARSAY_BIN: a hearsay binary to snapshot (another commit's); default: this tree's,
# built in release. The mock server is the debug build the test suites use.
target_dir=${CARGO_TARGET_DIR:-target}
hearsay=${HEARSAY_BIN:-}
if [[ -z "$hearsay" ]]; then
    cargo build --release -q -p hearsay
    hearsay=$target_dir/release/hearsay
fi
cargo build -q -p hearsay-tests --bin mock-openai
mock=$target_dir/debug/mock-openai
work=$(mktemp -d)
mock_pid=""
cleanup() {
    if [[ -n "$mock_pid" ]]; then kill "$mock_pid" 2>/dev/null || true; wait "$mock_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

for s in fish-market fish-market-zh forgetful-village rumour-200; do
    echo "snapshot: $s" >&2
    "$hearsay" run "scenarios/$s.toml" --out "$work/$s" --no-progress > /dev/null
done

"$mock" --latency-ms 5 --embed-latency-ms 1 --dims 384 > "$work/mock.out" &
mock_pid=$!
for _ in $(seq 100); do
    if grep -q '^url ' "$work/mock.out"; then break; fi
    sleep 0.1
done
url=$(sed -n 's/^url //p' "$work/mock.out")
[[ -n "$url" ]] || { echo "snapshot: the mock did not start" >&2; exit 1; }
sed -e "s#http://127.0.0.1:8080/v1#${url}#" -e "s#http://127.0.0.1:8081/v1#${url}#" \
    scenarios/fish-market-llm.toml > "$work/llm.toml"
echo "snapshot: fish-market-llm (mock)" >&2
"$hearsay" run "$work/llm.toml" --out "$work/fish-market-llm-mock" --no-progress \
    --no-preflight --set memory.visibility=barrier > /dev/null

python3 - "$work" <<'PY'
import sys; sys.path.insert(0, "scripts"); from runlog import log_bytes, log_lines
import hashlib, json, os, sys
work = sys.argv[1]
CLOCK = ("latency", "_ms", "per_second", "timing", "run_dir", "peak_rss", "wall", "url")

def clean(v):
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items() if not any(c in k for c in CLOCK)}
    if isinstance(v, list):
        return [clean(x) for x in v]
    return v

def digest(data):
    return hashlib.blake2b(data, digest_size=16).hexdigest()

for run in sorted(os.listdir(work)):
    d = os.path.join(work, run)
    if not os.path.isdir(d):
        continue
    events = digest(log_bytes(f"{d}/events.jsonl"))
    tape = digest("\n".join(json.dumps(clean(json.loads(l)), sort_keys=True)
                            for l in log_lines(f"{d}/llm.jsonl")).encode())
    summary = digest(json.dumps(clean(json.load(open(f"{d}/summary.json"))), sort_keys=True).encode())
    print(f"{run:24} events {events}  llm {tape}  summary {summary}")
PY
