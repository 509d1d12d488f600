# syntax=docker/dockerfile:1
# The bot: `trainbot serve` (Slack, the Alertmanager and MLflow webhooks, /healthz, /metrics). Slim: no torch
# and no Ray, which the bot never imports with the kuberay backend; the PostgreSQL driver for the state store;
# uid 10001, not root. No secret is baked in: the Deployment passes them as environment variables.
# Build from the repository root (BuildKit reads bot.Dockerfile.dockerignore, an allowlist):
#   docker build -f deploy/docker/bot.Dockerfile -t ghcr.io/trainbot/trainbot-bot:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/trainbot
# The dependencies first, in a layer of their own that changes only with pyproject.toml.
COPY pyproject.toml README.md ./
COPY deploy/docker/requirements.py deploy/docker/requirements.py
RUN python deploy/docker/requirements.py --without torch ray --extra postgres > /tmp/requirements.txt \
    && /opt/trainbot/bin/pip install --no-cache-dir -r /tmp/requirements.txt
COPY bot/ bot/
COPY actions/ actions/
COPY diagnosers/ diagnosers/
COPY playbooks/ playbooks/
COPY workloads/ workloads/
RUN /opt/trainbot/bin/pip install --no-cache-dir --no-deps .

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 trainbot \
    && useradd --system --uid 10001 --gid trainbot --home-dir /var/lib/trainbot --shell /usr/sbin/nologin trainbot \
    && install -d -o trainbot -g trainbot /var/lib/trainbot
COPY --from=build /opt/trainbot /opt/trainbot
# The Deployment mounts the data volume on TRAINBOT_DATA_DIR and keeps the root filesystem read-only:
# matplotlib's cache goes to /tmp, an emptyDir there.
ENV PATH=/opt/trainbot/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib \
    TRAINBOT_DATA_DIR=/var/lib/trainbot
USER 10001:10001
WORKDIR /var/lib/trainbot
EXPOSE 8080
ENTRYPOINT ["trainbot"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
