# Sourced by run.sh and trl.sh: a `genenv up` stack apart from anything else on the machine (a private Redis on
# port 6391, a fresh Postgres database, the control plane on port 8100), stopped and dropped on exit.
#   stack_up LOG_DIR      # exports GENENV_URL / GENENV_TOKEN once the stack answers
stack_up() {
  local logs="$1"
  mkdir -p "$logs"
  STACK_REDIS_DIR="$(mktemp -d)"
  redis-server --port 6391 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$STACK_REDIS_DIR" >/dev/null
  STACK_DB="genenv_extfig_$(date +%s)"
  psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $STACK_DB" >/dev/null
  export GENENV_DATABASE__URL="postgresql+psycopg://postgres@127.0.0.1:5432/$STACK_DB"
  export GENENV_REDIS__URL="redis://127.0.0.1:6391/0"
  export GENENV_AUTH__TOKENS='["extfig-token"]'
  export GENENV_URL="http://127.0.0.1:8100" GENENV_TOKEN=extfig-token
  genenv up --base-port 8100 --log-dir "$logs" > "$logs/up.log" 2>&1 &
  STACK_PID=$!
  trap stack_down EXIT
  for _ in $(seq 600); do
    grep -q "GENENV_TOKEN" "$logs/up.log" && return 0
    kill -0 "$STACK_PID" 2>/dev/null || break   # `genenv up` gave up (e.g. a port in use): say so now
    sleep 1
  done
  echo "the stack did not start; see $logs/up.log" >&2
  return 1
}

stack_down() {
  kill -TERM "$STACK_PID" 2>/dev/null || true; wait "$STACK_PID" 2>/dev/null || true
  redis-cli -p 6391 shutdown nosave >/dev/null 2>&1 || true
  psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $STACK_DB WITH (FORCE)" >/dev/null || true
}
