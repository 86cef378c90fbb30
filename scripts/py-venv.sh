#!/usr/bin/env bash
# A Python venv for the Python package's suite (tests/python): maturin to build the wheel,
# pytest, and what a reader of the export uses (pandas + pyarrow, polars, DuckDB;
# matplotlib for the README's example). Cached outside the repository, in
# ${HEARSAY_CACHE:-$HOME/.cache/hearsay}/py, keyed on these versions and Python's:
# about a minute the first time, nothing afterwards. Prints the venv's python on stdout.
# The wheel itself is installed into it by scripts/python-tests.sh, every time.
#
#   HEARSAY_PY=$(scripts/py-venv.sh)
set -euo pipefail
PACKAGES=(maturin==1.16.0 pytest==9.2.0 pandas==3.1.1 pyarrow==26.0.1 polars==2.1.0
    duckdb==2.0.1 tqdm==4.70.1 matplotlib==3.11.2)
PYTHON=${HEARSAY_PYTHON:-python3}
pyt=$("$PYTHON" -c 'import sys; print(f"py{sys.version_info[0]}{sys.version_info[1]}")')
key=$(printf '%s\n' "${PACKAGES[@]}" | sha256sum | cut -c1-12)
venv="${HEARSAY_CACHE:-$HOME/.cache/hearsay}/py/venv-$key-$pyt"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import maturin, pytest, pandas, pyarrow, polars, duckdb, tqdm, matplotlib' 2>/dev/null; then
    echo "py-venv: creating $venv (${PACKAGES[*]} from PyPI)" >&2
    rm -rf "$venv.tmp"
    "$PYTHON" -m venv "$venv.tmp"
    "$venv.tmp/bin/python" -m pip --disable-pip-version-check -q install "${PACKAGES[@]}" >&2
    rm -rf "$venv"
    mv "$venv.tmp" "$venv"
    # venvs record their path: recreate the scripts' shebangs for the final place.
    "$PYTHON" -m venv --upgrade "$venv" >&2
fi
echo "$venv/bin/python"
