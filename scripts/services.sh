#!/usr/bin/env bash
# Make sure Postgres (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer; start (or install and start) them if not.
set -euo pipefail
pg_up() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }
if ! command -v pg_isready >/dev/null || ! command -v redis-server >/dev/null; then
  echo "installing postgresql and redis-server (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server >/dev/null
fi
if ! pg_up; then
  echo "starting Postgres"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 30); do pg_up && break; sleep 1; done
  pg_up || { echo "Postgres did not start" >&2; exit 1; }
  # Fresh Debian clusters use peer auth; the tests connect over TCP as postgres without a password.
  if ! psql -h 127.0.0.1 -U postgres -c 'select 1' >/dev/null 2>&1; then
    hba=$(runuser -u postgres -- psql -tAc 'show hba_file')
    sed -i 's/\(host.*127.0.0.1\/32 *\)[a-z0-9-]*$/\1trust/' "$hba"
    runuser -u postgres -- psql -qc 'select pg_reload_conf()'
  fi
fi
if ! redis_up; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 20); do redis_up && break; sleep 0.5; done
  redis_up || { echo "Redis did not start" >&2; exit 1; }
fi
echo "Postgres and Redis are up"
