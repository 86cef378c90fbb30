#!/usr/bin/env bash
# Makes sure the `zstd` command is here: the scripts and the Python suite read a run's
# logs (events.jsonl.zst, llm.jsonl.zst) with `zstd -dc`, as a user would. Installs
# Debian's zstd package when it is missing (root, or passwordless sudo); prints the
# command's path.
set -euo pipefail
if ! command -v zstd >/dev/null 2>&1; then
    echo "zstd-cli.sh: apt-get install zstd" >&2
    run() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }
    apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends zstd)
    if ! run "${apt[@]}" >&2; then
        run apt-get update -q >&2
        run "${apt[@]}" >&2
    fi
fi
command -v zstd
