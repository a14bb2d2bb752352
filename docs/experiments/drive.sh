# Sourced by the experiment drivers (learning-calibration/run.sh, learning/run.sh): run a list of experiment files
# into one embedded home, one after another, so that re-running goes on where it stopped — an experiment already
# completed is skipped, one stopped part-way is resumed (`genenv experiment resume`), a new one is run. The caller
# has activated the venv and set PYTHONPATH to the pinned code.
#   upgrade_home HOME; drive_files HOME FILE...
# shellcheck shell=bash

stamp() { echo "$(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg): $*"; }

# The first column of the first row of an SQL query on HOME's database ("" when none).
home_query() {
  python -c 'import sqlite3,sys; r=sqlite3.connect(sys.argv[1]).execute(sys.argv[2],sys.argv[3:]).fetchone(); print("" if r is None else r[0])' "$@"
}

# HOME's database created or migrated to the code's schema; once, before any query or drive_files.
upgrade_home() { GENENV_DATABASE__URL="sqlite:///$1/genenv.db" genenv db upgrade >/dev/null; }

drive_files() {
  local home="$1" db="$1/genenv.db" file name id
  shift
  for file in "$@"; do
    name="$(python -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["name"])' "$file")"
    id="$(home_query "$db" "SELECT id FROM experiment WHERE name=?" "$name")"
    if [ -z "$id" ]; then
      stamp "run $name"
      genenv experiment run "$file" --home "$home" --keep --report-dir "$home/report-$name"
    # Done when every member completed (the stored experiment status stays "running"; readers derive it from the
    # members, as `genenv experiment show` does): a finished experiment costs no model-server start here.
    elif [ "$(home_query "$db" "SELECT count(*) FROM run WHERE experiment_id=? AND status != 'completed'" "$id")" != 0 ]; then
      stamp "resume $name ($id)"
      genenv experiment resume "$id" --home "$home" --report-dir "$home/report-$name"
    fi
    stamp "$name completed"
  done
}
