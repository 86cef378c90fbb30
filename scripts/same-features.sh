#!/usr/bin/env bash
# Checks that building the `hearsay` binary alone (`cargo build -p hearsay`, which is what
# maturin does for the Python wheel) resolves the same features for every dependency as
# the workspace build scripts/test.sh makes, so the wheel reuses the binary the suites ran
# instead of compiling shared crates a second time. Reads cargo's resolver (`cargo tree`);
# builds nothing. Prints what to add to crates/hearsay/Cargo.toml when they differ.
#
#   scripts/same-features.sh
set -euo pipefail
cd "$(dirname "$0")/.."
features() {
    cargo tree "$@" -e normal,build --prefix none -f '{p} [{f}]' | sed 's/ (\*)$//' | sort -u
}
alone=$(features -p hearsay)
workspace=$(features --workspace)
python3 - "$alone" "$workspace" <<'PY'
import re, sys
from collections import defaultdict
# A crate built for the host (build scripts, proc macros) and for the target gets a
# feature set each: compare the sets of feature lists, not one list per crate.
def load(text):
    out = defaultdict(set)
    for line in text.splitlines():
        m = re.match(r"(\S+) (v\S+)(?: \([^)]*\))? \[(.*)\]$", line.strip())
        if m:
            out[(m.group(1), m.group(2))].add(frozenset(filter(None, m.group(3).split(","))))
    return out
alone, workspace = load(sys.argv[1]), load(sys.argv[2])
if not alone:
    sys.exit("same-features: cargo tree printed nothing for -p hearsay")
differ = {k: v for k, v in alone.items() if k in workspace and workspace[k] != v}
if differ:
    print("same-features: `cargo build -p hearsay` (the wheel) would build these with other features "
          "than the workspace build, and so compile them (and what depends on them) twice:", file=sys.stderr)
    for (name, version), sets in sorted(differ.items()):
        extra = sorted(set().union(*workspace[(name, version)]) - set().union(*sets))
        print(f"  {name} {version}: alone {sorted(map(sorted, sets))}, workspace "
              f"{sorted(map(sorted, workspace[(name, version)]))}; add {extra} in crates/hearsay/Cargo.toml",
              file=sys.stderr)
    sys.exit(1)
print(f"same-features: the binary alone and the workspace agree on all {len(alone)} shared crates")
PY
