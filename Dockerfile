# The image deploy/'s manifests run (they give only args: `serve`, `dashboard`, `forecast run`):
#   docker build -t ghcr.io/headroom-dev/headroom:0.1.0 .
# Not built or tested on the machine this was written on (it has no Docker engine);
# tests/k8s/test_deploy_manifests.py checks only what can be read from this file.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# the project from this source tree (pyproject.toml's packages; no tests, benchmarks or deploy/)
WORKDIR /src
COPY pyproject.toml README.md ./
COPY controlplane ./controlplane
COPY forecaster ./forecaster
COPY scheduler ./scheduler
COPY dashboard ./dashboard
COPY protos ./protos
RUN pip install . && rm -rf /src

# the manifests' runAsUser / runAsGroup (10001); the root filesystem is read-only there, with an
# emptyDir on /tmp, so HOME (Streamlit's and the forecaster's scratch) is /tmp
RUN groupadd --system --gid 10001 headroom \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin headroom
ENV HOME=/tmp
WORKDIR /tmp
USER 10001:10001

ENTRYPOINT ["headroom"]
CMD ["--help"]
