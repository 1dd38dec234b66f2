#!/usr/bin/env bash
# Starts or stops a throwaway PostgreSQL cluster for the tests.
#
#   scripts/postgres.sh start DIR [PORT]   prints the URL to export as AGENTD_TEST_POSTGRES
#   scripts/postgres.sh restart DIR        (fast: open connections are cut)
#   scripts/postgres.sh stop DIR
#
# It uses Debian's PostgreSQL 15 (installing it when missing and allowed),
# runs the server as the postgres user when started as root (initdb refuses
# root), listens on 127.0.0.1 and a socket inside DIR, and trusts local
# connections: the cluster holds nothing but test data.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

bindir() {
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    if [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  done
}

run_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

cmd=${1:?start or stop}
dir=${2:?cluster directory}
case "$cmd" in
start)
  port=${3:-55432}
  bin=$(bindir)
  if [ -z "$bin" ]; then
    as_root apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >&2
    bin=$(bindir)
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
  chmod 700 "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    run_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # fsync stays on: the figures measured against this cluster are real
  # commits. max_connections leaves room for several nodes and parallel tests.
  run_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=400" start >&2 ||
    { cat "$dir/server.log" >&2; exit 1; }
  echo "postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
  ;;
restart)
  bin=$(bindir)
  run_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m fast -w restart >&2 ||
    { cat "$dir/server.log" >&2; exit 1; }
  ;;
stop)
  bin=$(bindir)
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    run_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
  ;;
*)
  echo "usage: $0 start|restart|stop DIR [PORT]" >&2; exit 2
  ;;
esac
