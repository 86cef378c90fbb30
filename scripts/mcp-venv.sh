#!/usr/bin/env bash
# A Python venv with the official MCP SDK (`mcp` from PyPI), for the MCP suite's client
# (tests/mcp/client.py). Cached outside the repository, in
# ${HEARSAY_CACHE:-$HOME/.cache/hearsay}/mcp, keyed on the SDK and Python versions:
# ~20 s the first time, nothing afterwards. Prints the venv's python on stdout.
#
#   HEARSAY_MCP_PYTHON=$(scripts/mcp-venv.sh)
set -euo pipefail
MCP_VERSION=2.3.0
PYTHON=${HEARSAY_PYTHON:-python3}
pyt=$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
venv="${HEARSAY_CACHE:-$HOME/.cache/hearsay}/mcp/venv-mcp-$MCP_VERSION-$pyt"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
    echo "mcp-venv: creating $venv (mcp $MCP_VERSION from PyPI)" >&2
    rm -rf "$venv.tmp"
    "$PYTHON" -m venv "$venv.tmp"
    "$venv.tmp/bin/python" -m pip --disable-pip-version-check -q install "mcp==$MCP_VERSION" >&2
    rm -rf "$venv"
    mv "$venv.tmp" "$venv"
    # venvs record their path: recreate the scripts' shebangs for the final place.
    "$PYTHON" -m venv --upgrade "$venv" >&2
fi
echo "$venv/bin/python"
