#!/usr/bin/env bash
# A Python venv for the Python package's suite (tests/python): maturin to build the wheel,
# pytest, and what a reader of the export uses (pandas + pyarrow, polars, DuckDB;
# matplotlib for the README's example), cached by scripts/cached-venv.sh: about a minute
# the first time, nothing afterwards. Prints the venv's python on stdout. The wheel itself
# is installed into it by scripts/python-tests.sh, every time.
#
#   HEARSAY_PY=$(scripts/py-venv.sh)
set -euo pipefail
exec "$(dirname "$0")/cached-venv.sh" py \
    'import maturin, pytest, pandas, pyarrow, polars, duckdb, tqdm, matplotlib' \
    maturin==1.16.0 pytest==9.2.0 pandas==3.1.1 pyarrow==26.0.1 polars==2.1.0 \
    duckdb==2.0.1 tqdm==4.70.1 matplotlib==3.11.2
