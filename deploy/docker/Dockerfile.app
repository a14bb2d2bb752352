# GenEnv application image: control-plane, simulator, verifier, curriculum (HTTP services), orchestrator and
# rollout workers (Celery), and the migration job. No torch: the package is installed without the train extra.
# Build from the repository root: docker build -f deploy/docker/Dockerfile.app -t genenv/app:0.1.0 .
# PYTHON_IMAGE: any Debian bookworm image with Python 3.11 (scripts/images.sh passes one built from Debian packages
# where no image registry is reachable).
ARG PYTHON_IMAGE=python:3.11.9-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/venv
# The dependencies get a layer keyed on pyproject.toml alone (project_requirements.py lists its
# [project].dependencies): a change to the sources then reinstalls only the genenv package
# (`--no-deps .`, seconds), not every dependency (docs/deployment.md, "Building the images").
# bfcl-eval without its dependencies: the verifier's BFCL multi-turn scoring needs only its pure-Python sources
# (its pinned dependencies would pull in model SDKs).
COPY pyproject.toml ./
COPY deploy/docker/project_requirements.py /tmp/project_requirements.py
RUN python /tmp/project_requirements.py pyproject.toml >/tmp/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir -r /tmp/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps bfcl-eval==2026.3.23
COPY README.md ./
COPY shared ./shared
COPY services ./services
# A plain (non-editable) install of the core distribution; the venv is copied whole into the runtime stage. The
# import check fails the build if uvloop went missing: the HTTP services' loop (genenv.http.serve also sets
# TCP_NODELAY itself, so the stdlib loop serves without stalls too, at more CPU per request).
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps . \
 && /opt/venv/bin/python -c "import genenv.settings, genenv.queue, uvloop" \
 && if /opt/venv/bin/python -c "import torch" 2>/dev/null; then echo "torch must not be in the app image" >&2; exit 1; fi

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 genenv \
 && useradd --system --uid 10001 --gid genenv --home-dir /home/genenv --create-home --shell /usr/sbin/nologin genenv \
 && install -d -o genenv -g genenv /var/lib/genenv /var/lib/genenv/adapters /var/lib/genenv/models
COPY --from=build /opt/venv /opt/venv
COPY deploy/scripts /opt/genenv/scripts
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    GENENV_QUEUE__EAGER=false \
    GENENV_PATHS__HOME=/var/lib/genenv \
    GENENV_PATHS__ADAPTER_STORE=/var/lib/genenv/adapters \
    GENENV_PATHS__MODEL_CACHE=/var/lib/genenv/models \
    HEALTHCHECK_URL=http://127.0.0.1:8000/readyz
WORKDIR /var/lib/genenv
USER 10001:10001
# HTTP services answer on HEALTHCHECK_URL (set it to the service's port); workers override this check with
# /opt/genenv/scripts/celery_ping.py in docker-compose.yml and Kubernetes.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
  CMD ["sh", "-c", "python /opt/genenv/scripts/wait-for.py --timeout 5 \"$HEALTHCHECK_URL\""]
EXPOSE 8000
CMD ["genenv", "serve", "control-plane", "--host", "0.0.0.0", "--port", "8000"]
