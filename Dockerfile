# syntax=docker/dockerfile:1
# One image for every server process of the chain: chain-node (the default entry point), chain-gateway and
# chain-operator (select one with the container's command, e.g. `command: ["chain-gateway"]`).
#
#   docker build -t chain-node:0.1.0 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     .
#
# Base images are pinned by digest through PYTHON_DIGEST and UV_DIGEST (the tag stays for readability; the
# digest decides). The defaults are the multi-platform index digests of the two tags. To move to a new base,
# change the tag and resolve its digest where a registry is reachable, e.g.
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm --format '{{json .Manifest.Digest}}'
#   crane digest ghcr.io/astral-sh/uv:0.9.8
# and commit both (or pass them as --build-arg). An empty digest (--build-arg PYTHON_DIGEST=) means tag only.
#
# Stage 1 resolves the locked runtime dependencies (uv.lock, no dev group) into /opt/venv and installs the
# project as a wheel; stage 2 copies only that venv onto a slim Python base and runs as an unprivileged user.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
ARG PYTHON_DIGEST=sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d
ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.9.8
ARG UV_DIGEST=sha256:08f409e1d53e77dfb5b65c788491f8ca70fe1d2d459f41c89afa2fcbef998abe

FROM ${UV_IMAGE}${UV_DIGEST:+@${UV_DIGEST}} AS uv

FROM ${PYTHON_IMAGE}${PYTHON_DIGEST:+@${PYTHON_DIGEST}} AS build
COPY --from=uv /uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/venv
WORKDIR /src
# Dependencies first: this layer is reused until pyproject.toml or uv.lock changes.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --locked --no-dev --no-install-project
COPY proto/ proto/
COPY node/ node/
COPY gateway/ gateway/
COPY operator/ operator/
RUN uv sync --locked --no-dev --no-editable

FROM ${PYTHON_IMAGE}${PYTHON_DIGEST:+@${PYTHON_DIGEST}} AS runtime
# OCI annotations: where the image comes from and which commit and version it is (set by the build).
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/example/chain-node
ARG PYTHON_IMAGE
ARG PYTHON_DIGEST
LABEL org.opencontainers.image.title="chain-node" \
      org.opencontainers.image.description="Version-control chain: node, REST/SSE gateway and Kubernetes operator" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}" \
      org.opencontainers.image.base.digest="${PYTHON_DIGEST}"
RUN groupadd --system --gid 10001 chain \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/chain --no-create-home \
       --shell /usr/sbin/nologin chain \
    && mkdir -p /var/lib/chain \
    && chown 10001:10001 /var/lib/chain
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CHAIN_NODE_DATA_DIR=/var/lib/chain/data \
    CHAIN_NODE_GRPC_ADDR=0.0.0.0:50051 \
    CHAIN_NODE_WEB_ADDR=0.0.0.0:50052 \
    CHAIN_GATEWAY_HTTP_ADDR=0.0.0.0:8080
WORKDIR /var/lib/chain
USER 10001:10001
# 50051 native gRPC, 50052 gRPC-web, 50053 AdminService, 8080 gateway REST/SSE, 9464/9465 metrics.
EXPOSE 50051 50052 50053 8080 9464 9465
ENTRYPOINT ["chain-node"]
