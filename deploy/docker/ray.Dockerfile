# syntax=docker/dockerfile:1
# What RayJobs run in (TRAINBOT_IMAGE): Ray from the rayproject/ray GPU image, torch, MLflow's client, and
# trainbot's workloads package (the built-in tiny-transformer template and the sweep driver). It runs as the
# base's `ray` user (uid 1000, group 100), not root. No secret is baked in.
# Build from the repository root (BuildKit reads ray.Dockerfile.dockerignore, an allowlist):
#   docker build -f deploy/docker/ray.Dockerfile -t ghcr.io/trainbot/trainbot:0.1.0 .
# RAY_VERSION stays within pyproject.toml's ray range, TORCH and MLFLOW within its pins
# (tests/unit/test_deploy_images.py): the head, the workers and the driver must run one Ray version.
ARG RAY_VERSION=2.60.0
ARG RAY_VARIANT=py311-gpu

FROM rayproject/ray:${RAY_VERSION}-${RAY_VARIANT}
ARG RAY_VERSION
ARG TORCH=2.13.0
ARG MLFLOW=3.17.2
# torch from PyPI is the CUDA build; ray[train,tune] adds what Ray Train and Tune need to the base's Ray.
RUN pip install --no-cache-dir "ray[train,tune]==${RAY_VERSION}" "torch==${TORCH}" "mlflow-skinny==${MLFLOW}"
COPY --chown=1000:100 workloads/ /home/ray/trainbot/workloads/
# `python -m workloads.tiny_transformer` and Ray Train's workers import it from here, whatever the job's cwd.
ENV PYTHONPATH=/home/ray/trainbot
USER 1000:100
