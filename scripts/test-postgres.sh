#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: Debian's postgresql, run as an unprivileged
# user in a temporary directory on a free loopback port, with no system service.
#   eval "$(bash scripts/test-postgres.sh start)"   starts one and sets FLOORLESS_TEST_POSTGRES
#                                                   (its URL) and FLOORLESS_TEST_POSTGRES_DIR
#   bash scripts/test-postgres.sh stop DIR          stops it and removes its directory
# fsync is off: the cluster holds nothing worth keeping past the test run.
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bin" ]; then
  echo "test-postgres: PostgreSQL is not installed (apt-get install postgresql)" >&2
  exit 1
fi
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
case "${1:-}" in
  start)
    dir=$(mktemp -d "${TMPDIR:-/tmp}/floorless-pg.XXXXXX")
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U floorless -E UTF8 --locale=C.UTF-8 \
      --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-k $dir -c listen_addresses=127.0.0.1 -p $port -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" \
      >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    echo "export FLOORLESS_TEST_POSTGRES=postgresql://floorless@127.0.0.1:$port/postgres"
    echo "export FLOORLESS_TEST_POSTGRES_DIR=$dir"
    ;;
  stop)
    dir=${2:?usage: test-postgres.sh stop DIR}
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
  *)
    echo "usage: test-postgres.sh start | stop DIR" >&2
    exit 2
    ;;
esac
