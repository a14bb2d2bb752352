#!/bin/sh
# Migration entrypoint (compose `migrate` service, Kubernetes Job genenv-migrate): wait for the database named by
# GENENV_DATABASE__URL, then bring its schema to the newest Alembic revision. Idempotent: a second run is a no-op.
set -eu
here="$(dirname "$0")"
python "$here/wait-for.py" --timeout "${WAIT_FOR_TIMEOUT_S:-180}" --from-env GENENV_DATABASE__URL
exec genenv db upgrade
