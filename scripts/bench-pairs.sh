#!/usr/bin/env bash
# Measures what a change saves: two builds of hearsay run the harness's town by turns
# (A B, then B A; `bench pairs`, tests/bin/bench/pairs.rs), and the medians, the rounds'
# own B ÷ A and whether both wrote the same logs go into docs/bench/pairs.json under
# LABEL and into docs/BENCHMARKS.md's generated "Alternating pairs" block.
#
#   scripts/bench-pairs.sh LABEL REV_A REV_B [NPCS [TICKS [ROUNDS]]]
#
# A revision is a commit (built in a worktree of its own, into target/pairs, which keeps
# the dependencies built between uses) or `.`: this checkout's commit when the tree is
# clean, else the checkout as it is, built into target/ (the harness records a dirty
# tree as such). Defaults: 10,000 NPCs, 40 ticks, 4 rounds
# (about 10 minutes on 2 cores once both are built).
set -euo pipefail
cd "$(dirname "$0")/.."

label="${1:?LABEL REV_A REV_B [NPCS [TICKS [ROUNDS]]]}"
rev_a="${2:?REV_A}"
rev_b="${3:?REV_B}"
npcs="${4:-10000}"
ticks="${5:-40}"
rounds="${6:-4}"

cargo build --release -q -p hearsay -p hearsay-tests --bin hearsay --bin bench
work=$(mktemp -d)
worktrees=()
cleanup() {
    for w in "${worktrees[@]}"; do git worktree remove --force "$w" || true; done
    rm -rf "$work"
}
trap cleanup EXIT

shared="$PWD/target/pairs"
# Sets $built to the binary of revision $1, built in worktree $work/$2 (or this
# checkout's, for `.`).
build() {
    local rev="$1"
    if [[ "$rev" == "." ]]; then
        if git diff --quiet HEAD -- . ':(exclude)*.md' ':(exclude)docs/bench'; then
            # A clean tree is its commit: built in a worktree like any other, so an edit
            # made while the pair runs cannot be mistaken for part of what was measured.
            rev=$(git rev-parse HEAD)
        else
            built="$PWD/target/release/hearsay"
            return
        fi
    fi
    git worktree add -q --detach "$work/$2" "$rev"
    worktrees+=("$work/$2")
    (cd "$work/$2" && CARGO_TARGET_DIR="$shared" cargo build --release -q -p hearsay)
    # Inside the worktree, so the harness finds the commit it was built from.
    cp "$shared/release/hearsay" "$work/$2/hearsay-measured"
    built="$work/$2/hearsay-measured"
}
build "$rev_a" a
a="$built"
build "$rev_b" b
b="$built"
target/release/bench pairs "$label" --a "$a" --b "$b" \
    --npcs "$npcs" --ticks "$ticks" --rounds "$rounds" --out docs/bench/pairs.json
target/release/bench render --before docs/bench/before.json --after docs/bench/after.json \
    --into docs/BENCHMARKS.md --readme README.md --pairs docs/bench/pairs.json
