#!/usr/bin/env bash
# A Python venv with the official MCP SDK (`mcp` from PyPI), for the MCP suite's client
# (tests/mcp/client.py), cached by scripts/cached-venv.sh: ~20 s the first time, nothing
# afterwards. Prints the venv's python on stdout.
#
#   HEARSAY_MCP_PYTHON=$(scripts/mcp-venv.sh)
set -euo pipefail
exec "$(dirname "$0")/cached-venv.sh" mcp 'import mcp' mcp==2.3.0
