#!/usr/bin/env bash
# Create (once) and start a throwaway PostgreSQL cluster on loopback, then print its URL.
# Idempotent: a second call reuses the running cluster. Usage:
#   export SGLANG_TUNER_TEST_PG_URL="$(scripts/ci_postgres.sh)"
# Settings: PG_DIR (default /tmp/sglang-tuner-pg), PG_PORT (default 55432), PG_BIN (Debian's PostgreSQL 15).
set -euo pipefail

PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}"
PG_DIR="${PG_DIR:-/tmp/sglang-tuner-pg}"
PG_PORT="${PG_PORT:-55432}"
PG_DB="${PG_DB:-sglang_tuner_test}"
PG_USER="${PG_USER:-sglang_tuner}"

if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
    echo "ci_postgres: no PostgreSQL binaries found (install postgresql from Debian packages)" >&2
    exit 1
fi

# PostgreSQL refuses to run as root: run the cluster as the `postgres` system user when we are root.
as_owner() {
    if [ "$(id -u)" = "0" ]; then
        su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
    else
        "$@"
    fi
}

if [ ! -f "$PG_DIR/PG_VERSION" ]; then
    mkdir -p "$PG_DIR"
    [ "$(id -u)" = "0" ] && chown postgres: "$PG_DIR"
    as_owner "$PG_BIN/initdb" -D "$PG_DIR" -U "$PG_USER" --auth=trust -E UTF8 >/dev/null
    # Tests only: durability traded for speed.
    cat >>"$PG_DIR/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
CONF
fi

if ! as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR" status >/dev/null 2>&1; then
    as_owner "$PG_BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 30 start >/dev/null
fi

if ! as_owner "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'" | grep -q 1; then
    as_owner "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" "$PG_DB"
fi

echo "postgresql+asyncpg://$PG_USER@127.0.0.1:$PG_PORT/$PG_DB"
