#!/usr/bin/env bash
# The Python package's suite: builds the wheel with maturin from the binary scripts/test.sh
# built (the dev profile and the workspace's feature set, so nothing is compiled again:
# scripts/same-features.sh checks, and under CI a wheel build that compiles anything
# fails), installs it into the cached venv of scripts/py-venv.sh, and runs tests/python
# with pytest against the installed package and its binary. Prints the wheel's size and
# how long the build took.
#
#   scripts/python-tests.sh [PYTEST ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(scripts/py-venv.sh)
venv=$(dirname "$(dirname "$py")")
scripts/same-features.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

started=$(date +%s%N)
(cd python && "$venv/bin/maturin" build --profile dev --strip false --out "$work/wheels") >"$work/build.log" 2>&1 || {
    cat "$work/build.log" >&2
    echo "python-tests: maturin could not build the wheel" >&2
    exit 1
}
took=$(( ($(date +%s%N) - started) / 1000000 ))
if grep -q '^ *Compiling ' "$work/build.log"; then
    grep '^ *Compiling ' "$work/build.log" >&2
    if [[ "${CI:-}" == "true" ]]; then
        echo "python-tests: the wheel's build compiled crates again (see above); it must reuse the binary the suites ran" >&2
        exit 1
    fi
    echo "python-tests: the wheel's build compiled the crates above (the binary was not built yet, or is out of date)" >&2
fi
wheel=$(ls "$work"/wheels/hearsay-*.whl)
echo "python-tests: built $(basename "$wheel") ($(( $(stat -c %s "$wheel") / 1024 / 1024 )) MiB, dev profile) in ${took} ms"
"$py" -m pip --disable-pip-version-check -q install --force-reinstall --no-deps "$wheel"
# From outside the repository: the package under test is the installed one, not python/.
cd "$work"
env -u HEARSAY_BINARY "$py" -m pytest -q -p no:cacheprovider "$OLDPWD/tests/python" "$@"
