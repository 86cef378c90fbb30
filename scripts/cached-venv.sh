#!/usr/bin/env bash
# A Python venv with pinned packages from PyPI, cached outside the repository in
# ${HEARSAY_CACHE:-$HOME/.cache/hearsay}/NAME, keyed on the packages and the Python
# version: made once, reused after. Prints the venv's python on stdout. The suites' venvs
# (scripts/mcp-venv.sh, scripts/py-venv.sh) are this with their own packages.
#
#   scripts/cached-venv.sh NAME 'import a, b' PACKAGE==VERSION...
set -euo pipefail
name=${1:?NAME}
check=${2:?the import that proves the venv complete}
shift 2
(($# > 0)) || { echo "cached-venv: no packages" >&2; exit 2; }
PYTHON=${HEARSAY_PYTHON:-python3}
pyt=$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
key=$(printf '%s\n' "$@" | sha256sum | cut -c1-12)
venv="${HEARSAY_CACHE:-$HOME/.cache/hearsay}/$name/venv-$key-$pyt"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "cached-venv: creating $venv ($* from PyPI)" >&2
    rm -rf "$venv.tmp"
    "$PYTHON" -m venv "$venv.tmp"
    "$venv.tmp/bin/python" -m pip --disable-pip-version-check -q install "$@" >&2
    rm -rf "$venv"
    mv "$venv.tmp" "$venv"
    # venvs record their path: recreate the scripts' shebangs for the final place.
    "$PYTHON" -m venv --upgrade "$venv" >&2
fi
echo "$venv/bin/python"
