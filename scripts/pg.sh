#!/usr/bin/env bash
# Throwaway PostgreSQL 15 + pgvector 0.8 clusters for hearsay's tests.
#
#   scripts/pg.sh install            idempotent; makes sure PostgreSQL 15 and pgvector 0.8
#                                    are installed. Debian 12 has no pgvector 0.8 for PG15,
#                                    so it is built from trixie's *source* package against
#                                    PG15. Cold: ~12 s on the dev box (apt-get install of
#                                    postgresql-server-dev-15 + clang-14, 9 MB, ~5 s; trixie
#                                    Sources index, 11 MB, ~2 s; compile ~4 s); on a bare
#                                    bookworm box that also lacks llvm-14-dev, count 1-2 min.
#                                    Warm: ~0.03 s (vector.control is there: nothing done).
#   scripts/pg.sh start ENVFILE      new temp dir (hearsay-pg.XXXXXX under $TMPDIR or /tmp),
#                                    initdb, free 127.0.0.1 port, pg_ctl start -w, creates
#                                    database `hearsay` with CREATE EXTENSION vector, writes
#                                    ENVFILE (shell-sourceable KEY=VALUE lines): DATABASE_URL
#                                    PG_PORT PG_DATA PG_DIR PG_LOG PG_BIN. ~1.2 s.
#   scripts/pg.sh stop ENVFILE       pg_ctl stop -m fast (bounded; -m immediate, then KILL of
#                                    that cluster's own postmaster as fallbacks), waits until
#                                    no process of that cluster is left, removes the temp dir.
#                                    Idempotent. ENVFILE itself is left alone. ~0.6 s (~2 s busy).
#   scripts/pg.sh restart ENVFILE    pg_ctl restart -m fast -w (same port, data, options,
#                                    log), then a bounded wait until it accepts connections.
#                                    ~0.3 s idle, ~1.2 s with both cores busy.
#
# Typical use:  scripts/pg.sh install && scripts/pg.sh start "$tmp/pg.env" &&
#               set -a && . "$tmp/pg.env" && set +a; ...; scripts/pg.sh stop "$tmp/pg.env"
# If the user already provides DATABASE_URL, the test script uses that database instead
# and does not call `start` at all (the database must then have pgvector >= 0.8 available).
#
# Server processes run as the `postgres` OS user (initdb refuses root) when this script
# runs as root; as any other user they run as that user. The SQL superuser is always
# `postgres`; authentication is trust, and the server listens on 127.0.0.1 and on a unix
# socket in the temp dir only. fsync stays on; synchronous_commit=off.
#
# Environment knobs: HEARSAY_PG_WAIT (start/restart/stop timeout in seconds, default 60),
# HEARSAY_APT_MIRROR (Debian mirror URI for the trixie deb-src entry; by default the URI
# of this machine's own APT source for its release, as apt itself parses it).
#
# Traps handled here:
#   * upstream pgvector's Makefile adds -march=native on x86_64 (Debian's source package
#     patches that out): the build passes OPTFLAGS="" anyway and fails if -march=native
#     shows up, so the .so does not SIGILL on other CPUs (its AVX-512/F16C paths are
#     runtime-dispatched).
#   * an installed pgvector older than 0.8 (bookworm's postgresql-15-pgvector is 0.4.1)
#     makes `install` fail with a hint instead of silently passing.
#   * a slow-reaping PID 1 (containers) leaves exited postmasters as zombies: `stop`
#     counts a zombie as gone instead of waiting on it or signalling it.
#   * the trixie entry is deb-src only (no trixie binaries can be installed), lives in its
#     own file, and `apt-get update`/`apt-get source` read only that file.
#   * `pg_ctl restart` without -l would attach the server to the caller's stdout (a
#     `$(...)` or a pipe would then never end): -l is always passed.
#   * small /dev/shm (64 MB in default Docker) breaks parallel HNSW builds: posix DSM is
#     used only if /dev/shm has >= 1 GB free, mmap DSM otherwise.
set -euo pipefail

PG_MAJOR=15
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_CONFIG=$PG_BIN/pg_config
PGVECTOR_SERIES=0.8
SRC_SUITE=trixie
SRC_LIST=/etc/apt/sources.list.d/hearsay-trixie-src.list
WAIT=${HEARSAY_PG_WAIT:-60}
DIR_PREFIX=hearsay-pg.

say() { printf 'pg: %s\n' "$*"; }
err() { printf 'pg: error: %s\n' "$*" >&2; }
die() { err "$*"; exit 1; }
usage() {
  printf 'usage: %s install | start ENVFILE | stop ENVFILE | restart ENVFILE\n' "$0" >&2
  exit 2
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

case "$WAIT" in '' | *[!0-9]*) die "HEARSAY_PG_WAIT must be a whole number of seconds" ;; esac

# ---------------------------------------------------------------------------------------
# install

ext_dir() { [ -x "$PG_CONFIG" ] && printf '%s/extension\n' "$("$PG_CONFIG" --sharedir)"; }

vector_version() { # default_version from the installed control file
  sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" \
    "$1/vector.control"
}

pkg_installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else die "need root (or passwordless sudo) for: $*"
  fi
}

apt_install_missing() {
  local missing=() p
  for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
  if [ "${#missing[@]}" -eq 0 ]; then
    say "packages already installed: $*"
    return 0
  fi
  say "apt-get install ${missing[*]}"
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends)
  if ! as_root "${apt[@]}" "${missing[@]}"; then
    say "install failed; refreshing the package lists once and retrying"
    as_root apt-get update -q
    as_root "${apt[@]}" "${missing[@]}"
  fi
}

# The mirror this machine already uses for its Debian release, as apt itself parses
# /etc/apt/sources.list and /etc/apt/sources.list.d/*.list|*.sources (one-line and deb822).
derive_mirror() {
  if [ -n "${HEARSAY_APT_MIRROR:-}" ]; then
    printf '%s\n' "${HEARSAY_APT_MIRROR%/}"
    return 0
  fi
  local codename uri
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release; set HEARSAY_APT_MIRROR"
  # Release (suite) must be exactly the codename: skips -security/-updates/-backports
  # and third-party repositories.
  # shellcheck disable=SC2016 # $(...) are apt format fields, not shell
  uri=$(apt-get indextargets --no-release-info \
          --format '$(RELEASE) $(COMPONENT) $(REPO_URI)' 2>/dev/null |
        awk -v c="$codename" '$1 == c && $2 == "main" { print $3; exit }')
  if [ -z "$uri" ]; then # fallback: one-line entries
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
          sed -e 's/#.*//' -e 's/\[[^]]*\]//' |
          awk -v c="$codename" '$1 == "deb" && $3 == c { print $2; exit }')
  fi
  if [ -z "$uri" ]; then # fallback: deb822 stanzas
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
          awk -v c="$codename" '
            function flush() { if (deb && suite && uri != "" && !off) { print uri; exit } }
            /^[[:space:]]*$/ { flush(); deb = suite = off = 0; uri = ""; next }
            /^[[:space:]]*#/ { next }
            tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            tolower($1) == "uris:" { uri = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == c) suite = 1 }
            tolower($1) == "enabled:" && tolower($2) == "no" { off = 1 }
            END { flush() }')
  fi
  [ -n "$uri" ] || die "could not find the Debian mirror for '$codename' in the APT sources; set HEARSAY_APT_MIRROR"
  printf '%s\n' "${uri%/}"
}

# apt options that make apt read ONLY our deb-src file (and keep the other lists).
APT_ONLY_SRC=(-o "Dir::Etc::sourcelist=$SRC_LIST" -o "Dir::Etc::sourceparts=-"
              -o "APT::Get::List-Cleanup=0")

cmd_install() {
  local t0 dir
  t0=$(now)
  dir=$(ext_dir || true)
  if [ -n "$dir" ] && [ -f "$dir/vector.control" ]; then
    local have
    have=$(vector_version "$dir")
    case "$have" in
      0.[0-7] | 0.[0-7].*) # e.g. bookworm's postgresql-15-pgvector 0.4.1: too old, and
        # dpkg owns its files, so do not overwrite them
        die "pgvector $have is installed in $dir but hearsay needs >= $PGVECTOR_SERIES (hnsw.iterative_scan); remove it (apt-get remove postgresql-$PG_MAJOR-pgvector) and rerun" ;;
    esac
    say "pgvector $have already installed in $dir; nothing to do ($(since "$t0") s)"
    return 0
  fi

  apt_install_missing postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR dpkg-dev build-essential
  dir=$(ext_dir) || die "$PG_CONFIG missing after installing postgresql-server-dev-$PG_MAJOR"

  local mirror keyring opts line
  mirror=$(derive_mirror)
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  opts=""
  [ -f "$keyring" ] && opts="[signed-by=$keyring] "
  line="deb-src ${opts}${mirror} ${SRC_SUITE} main"
  say "writing $SRC_LIST: $line"
  printf '# Added by hearsay scripts/pg.sh: source packages only (pgvector %s.x for PG%s).\n%s\n' \
    "$PGVECTOR_SERIES" "$PG_MAJOR" "$line" | as_root tee "$SRC_LIST.tmp" >/dev/null
  as_root mv "$SRC_LIST.tmp" "$SRC_LIST"

  say "apt-get update (only $SRC_LIST)"
  if ! as_root apt-get update -q "${APT_ONLY_SRC[@]}"; then
    # Older debian-archive-keyring versions lack the trixie keys; the current bookworm
    # one has them.
    say "update failed; upgrading debian-archive-keyring once and retrying"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debian-archive-keyring
    as_root apt-get update -q "${APT_ONLY_SRC[@]}"
  fi

  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/hearsay-pgvector-src.XXXXXX")
  # apt downloads as the _apt sandbox user, which must be able to write there
  if id _apt >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then chown _apt "$work"; fi
  chmod 755 "$work"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  say "apt-get source pgvector/$SRC_SUITE in $work"
  (cd "$work" && as_root apt-get source -q --only-source "${APT_ONLY_SRC[@]}" "pgvector/$SRC_SUITE")
  local src
  src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n 1)
  if [ -z "$src" ] || [ ! -f "$src/Makefile" ]; then die "no unpacked pgvector source tree in $work"; fi
  local ver
  ver=$(sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\([^']*\)'.*/\1/p" "$src/vector.control")
  case "$ver" in
    "$PGVECTOR_SERIES".*) ;;
    *) die "trixie's pgvector is '$ver', expected $PGVECTOR_SERIES.x" ;;
  esac
  # Upstream sets OPTFLAGS = -march=native; Debian's patch "no-native" comments it out.
  # Either way OPTFLAGS="" below is what keeps the build portable.
  grep -q 'OPTFLAGS' "$src/Makefile" ||
    die "pgvector's Makefile no longer mentions OPTFLAGS; check how it sets -march"

  # OPTFLAGS="" drops -march=native (portable binary); with_llvm=no skips the JIT bitcode
  # (not needed, halves compile time); both must be the same for make and make install.
  local mk=(make -C "$src" "PG_CONFIG=$PG_CONFIG" "OPTFLAGS=" with_llvm=no)
  say "building pgvector $ver against PG$PG_MAJOR (OPTFLAGS=\"\")"
  "${mk[@]}" -j"$(nproc 2>/dev/null || echo 2)" >"$work/build.log" 2>&1 ||
    { tail -n 40 "$work/build.log" >&2; die "pgvector build failed"; }
  if grep -q -- '-march=native' "$work/build.log"; then
    die "build still used -march=native"
  fi
  as_root "${mk[@]}" install >"$work/install.log" 2>&1 ||
    { tail -n 40 "$work/install.log" >&2; die "pgvector make install failed"; }
  [ -f "$dir/vector.control" ] || die "make install did not put vector.control in $dir"
  rm -rf "$work"
  trap - EXIT
  say "pgvector $(vector_version "$dir") installed for PG$PG_MAJOR in $dir ($(since "$t0") s)"
}

# ---------------------------------------------------------------------------------------
# cluster helpers

if [ "$(id -u)" -eq 0 ]; then
  RUN_AS=postgres
  as_pg() { runuser -u postgres -- "$@"; }
else
  RUN_AS=$(id -un)
  as_pg() { "$@"; }
fi

psql_url() { # psql_url URL SQL...  (no ~/.psqlrc, stop at the first error)
  local url=$1; shift
  PGCONNECT_TIMEOUT=5 "$PG_BIN/psql" "$url" -X -q -A -t -v ON_ERROR_STOP=1 "$@"
}

free_port() {
  local py
  for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1; then
      "$py" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()' &&
        return 0
    fi
  done
  local _ p
  for _ in $(seq 1 50); do # bounded fallback: random high port nobody answers on
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then printf '%s\n' "$p"; return 0; fi
  done
  die "no free port found"
}

read_envfile() { # sets E_* from ENVFILE without executing it
  local f=$1 k v
  E_PG_DIR="" E_PG_DATA="" E_PG_LOG="" E_PG_PORT="" E_DATABASE_URL=""
  while IFS='=' read -r k v; do
    case "$k" in
      PG_DIR) E_PG_DIR=$v ;;
      PG_DATA) E_PG_DATA=$v ;;
      PG_LOG) E_PG_LOG=$v ;;
      PG_PORT) E_PG_PORT=$v ;;
      DATABASE_URL) E_DATABASE_URL=$v ;;
    esac
  done <"$f"
  # Only ever touch a directory this script created.
  case "$E_PG_DIR" in
    /*/"$DIR_PREFIX"??????) ;;
    *) die "$f: PG_DIR '$E_PG_DIR' is not a $DIR_PREFIX* temp dir made by this script" ;;
  esac
  [ "$E_PG_DATA" = "$E_PG_DIR/data" ] || die "$f: PG_DATA is not \$PG_DIR/data"
}

alive() { # live and not a zombie (a slow-reaping PID 1 can leave exited postmasters as Z)
  local st
  kill -0 "$1" 2>/dev/null || return 1
  st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null || true)
  [ "$st" != Z ] && [ "$st" != X ]
}

postmaster_pid() { # first line of postmaster.pid, if it names a live process
  local pid
  [ -f "$1/postmaster.pid" ] || return 1
  pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null || true)
  case "$pid" in '' | *[!0-9]*) return 1 ;; esac
  alive "$pid" || return 1
  printf '%s\n' "$pid"
}

cluster_pids() { # every process whose cwd is the data dir (postmaster and all backends)
  local d=$1 p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/cwd" 2>/dev/null || true)" = "$d" ] && printf '%s\n' "${p#/proc/}"
  done
  return 0
}

wait_accepting() { # bounded: until `SELECT 1` works over TCP
  local url=$1 _
  for _ in $(seq 1 $((WAIT * 5))); do
    psql_url "$url" -c 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

# ---------------------------------------------------------------------------------------
# start / stop / restart

cmd_start() {
  local envfile=$1 t0
  t0=$(now)
  [ -x "$PG_BIN/initdb" ] || die "$PG_BIN/initdb missing; run: scripts/pg.sh install"
  local extd
  extd=$(ext_dir || true)
  if [ -z "$extd" ] || [ ! -f "$extd/vector.control" ]; then
    die "pgvector is not installed for PG$PG_MAJOR; run: scripts/pg.sh install"
  fi
  mkdir -p "$(dirname "$envfile")"

  local base=${TMPDIR:-/tmp} dir
  dir=$(mktemp -d "$base/${DIR_PREFIX}XXXXXX")
  if [ "$RUN_AS" = postgres ] && [ "$(id -u)" -eq 0 ]; then
    chown postgres:postgres "$dir"
    if ! runuser -u postgres -- test -w "$dir"; then # e.g. TMPDIR under /root
      rmdir "$dir"
      dir=$(mktemp -d "/tmp/${DIR_PREFIX}XXXXXX")
      chown postgres:postgres "$dir"
    fi
  fi
  chmod 700 "$dir"
  local data=$dir/data log=$dir/postgres.log
  STARTED_DIR=$dir STARTED_DATA=$data
  trap 'start_failed' EXIT

  say "initdb in $data (as $RUN_AS)"
  local loc=(--locale=C.UTF-8)
  locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$' || loc=(--no-locale)
  (cd "$dir" && as_pg "$PG_BIN/initdb" -D "$data" -U postgres -A trust -E UTF8 "${loc[@]}" \
      --no-sync --no-instructions >"$dir/initdb.log" 2>&1) ||
    { cat "$dir/initdb.log" >&2; die "initdb failed"; }

  cat >"$data/pg_hba.conf" <<'EOF'
# hearsay throwaway cluster: trust, local socket and 127.0.0.1 only
local   all             all                     trust
host    all             all     127.0.0.1/32    trust
local   replication     all                     trust
host    replication     all     127.0.0.1/32    trust
EOF
  local dsm=posix shm_kb
  shm_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }' || true)
  case "$shm_kb" in '' | *[!0-9]*) shm_kb=0 ;; esac
  [ "$shm_kb" -ge 1048576 ] || dsm=mmap
  printf "include 'hearsay.conf'\n" >>"$data/postgresql.conf"

  local port attempt ok=0
  for attempt in 1 2 3; do
    port=$(free_port)
    cat >"$data/hearsay.conf" <<EOF
# written by hearsay scripts/pg.sh
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 100
shared_buffers = 256MB
synchronous_commit = off
dynamic_shared_memory_type = $dsm
EOF
    chown -R "$RUN_AS" "$data/pg_hba.conf" "$data/hearsay.conf" "$data/postgresql.conf"
    say "pg_ctl start on 127.0.0.1:$port (attempt $attempt, wait <= ${WAIT}s)"
    if (cd "$dir" && as_pg "$PG_BIN/pg_ctl" start -D "$data" -l "$log" -w -t "$WAIT" \
          >>"$dir/pg_ctl.log" 2>&1); then
      ok=1; break
    fi
    if postmaster_pid "$data" >/dev/null; then break; fi # running but not ready: give up
    grep -q 'could not bind\|Address already in use' "$log" 2>/dev/null || break
    say "port $port was taken meanwhile; retrying with another one"
  done
  [ "$ok" = 1 ] || { tail -n 30 "$log" >&2 2>/dev/null || true; die "server did not start"; }

  local url_base="postgres://postgres@127.0.0.1:$port" url
  url="$url_base/hearsay"
  psql_url "$url_base/postgres" -c 'CREATE DATABASE hearsay' >/dev/null
  local ext
  ext=$(psql_url "$url" -c 'CREATE EXTENSION IF NOT EXISTS vector' \
          -c "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
  [ -n "$ext" ] || die "CREATE EXTENSION vector did not take"

  {
    printf 'DATABASE_URL=%s\n' "$url"
    printf 'PG_PORT=%s\n' "$port"
    printf 'PG_DATA=%s\n' "$data"
    printf 'PG_DIR=%s\n' "$dir"
    printf 'PG_LOG=%s\n' "$log"
    printf 'PG_BIN=%s\n' "$PG_BIN"
  } >"$envfile.tmp.$$"
  mv "$envfile.tmp.$$" "$envfile"
  trap - EXIT
  say "up: $url (pgvector $ext, data $data, log $log) in $(since "$t0") s; env in $envfile"
}

start_failed() { # EXIT trap of start: undo a half-made cluster (only ours)
  local rc=$?
  [ "$rc" -ne 0 ] || return 0
  [ -n "${STARTED_DIR:-}" ] || return 0
  err "start failed; removing $STARTED_DIR"
  if postmaster_pid "$STARTED_DATA" >/dev/null 2>&1; then
    (cd "$STARTED_DIR" && as_pg "$PG_BIN/pg_ctl" stop -D "$STARTED_DATA" -m immediate -w -t 15) \
      >/dev/null 2>&1 || true
  fi
  rm -rf "$STARTED_DIR"
}

cmd_stop() {
  local envfile=$1 t0
  t0=$(now)
  if [ ! -f "$envfile" ]; then say "no $envfile; nothing to stop"; return 0; fi
  read_envfile "$envfile"
  local dir=$E_PG_DIR data=$E_PG_DATA
  if [ ! -d "$dir" ]; then say "$dir already gone; nothing to stop"; return 0; fi

  local pid
  if pid=$(postmaster_pid "$data"); then
    say "pg_ctl stop -m fast ($data, postmaster $pid, wait <= ${WAIT}s)"
    if ! (cd "$dir" && as_pg "$PG_BIN/pg_ctl" stop -D "$data" -m fast -w -t "$WAIT" >/dev/null); then
      err "fast shutdown timed out; trying immediate"
      (cd "$dir" && as_pg "$PG_BIN/pg_ctl" stop -D "$data" -m immediate -w -t 15 >/dev/null) || true
    fi
    local _
    for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done # pid file goes first
    if alive "$pid"; then
      err "postmaster $pid still alive; sending KILL to it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  else
    say "server of $data is not running"
  fi
  # Backends exit by themselves once the postmaster is gone; wait (bounded) for them.
  local _ left=""
  for _ in $(seq 1 $((WAIT * 5))); do
    left=$(cluster_pids "$data")
    [ -z "$left" ] && break
    sleep 0.2
  done
  [ -z "$left" ] || err "processes of this cluster still running: $(printf '%s' "$left" | tr '\n' ' ')"
  rm -rf "$dir"
  say "stopped; removed $dir ($(since "$t0") s)"
}

cmd_restart() {
  local envfile=$1 t0
  t0=$(now)
  [ -f "$envfile" ] || die "no $envfile; start a cluster first"
  read_envfile "$envfile"
  local dir=$E_PG_DIR data=$E_PG_DATA log=$E_PG_LOG
  [ -d "$data" ] || die "$data does not exist"
  case "$log" in "$dir"/*) ;; *) die "$envfile: PG_LOG is not inside PG_DIR" ;; esac
  say "pg_ctl restart -m fast ($data, port $E_PG_PORT, wait <= ${WAIT}s)"
  # -l again: without it the restarted server would write to (and hold) our stdout.
  (cd "$dir" && as_pg "$PG_BIN/pg_ctl" restart -D "$data" -l "$log" -m fast -w -t "$WAIT" \
      >/dev/null) || { tail -n 30 "$log" >&2 || true; die "pg_ctl restart failed"; }
  wait_accepting "$E_DATABASE_URL" ||
    { tail -n 30 "$log" >&2 || true; die "not accepting connections ${WAIT}s after restart"; }
  say "restarted; accepting connections on port $E_PG_PORT after $(since "$t0") s"
}

# ---------------------------------------------------------------------------------------

[ $# -ge 1 ] || usage
case "$1" in
  install) [ $# -eq 1 ] || usage; cmd_install ;;
  start) [ $# -eq 2 ] || usage; cmd_start "$2" ;;
  stop) [ $# -eq 2 ] || usage; cmd_stop "$2" ;;
  restart) [ $# -eq 2 ] || usage; cmd_restart "$2" ;;
  *) usage ;;
esac
