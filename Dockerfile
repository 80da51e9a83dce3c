# syntax=docker/dockerfile:1
#
# One image for every KernelEvolve service; the Kubernetes manifests pick the
# service with `command: ["kernelevolve-<service>"]` (deploy/k8s/).
#
#   CPU image (gateway, search, synthesizer, knowledge, evaluator-cpu):
#     docker build -t kernelevolve:0.1.0 .
#   NVIDIA image (evaluator-nvidia): the same, with a CUDA build of torch:
#     docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 \
#       -t kernelevolve-cuda:0.1.0 .
#     (choose the cuXYZ index that matches the CUDA version your GPU nodes' driver supports)
#
# torch's version is not repeated here: it is read from the pin in pyproject.toml.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build

# Index that torch is installed from. The default CPU-only build keeps the image
# small; the plain PyPI wheel would pull several GB of CUDA libraries.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src

# torch first, on its own layer (it is by far the largest dependency and changes
# least). "torch==X" from pyproject matches the index's "X+cpu" / "X+cuNNN" build.
COPY pyproject.toml ./
# hadolint ignore=DL3013
RUN set -eu; \
    torch_pin="$(grep -oE '"torch==[^"]+"' pyproject.toml | tr -d '"')"; \
    test -n "$torch_pin"; \
    pip install --index-url "$TORCH_INDEX_URL" "$torch_pin"; \
    python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

# The project itself (pyproject lists README.md as the package readme).
COPY README.md ./
COPY libs ./libs
COPY cli ./cli
COPY services ./services
RUN pip install .


FROM ${PYTHON_IMAGE} AS runtime

# A C compiler and libc headers: Triton compiles its small GPU launcher stubs
# with the system compiler the first time a kernel runs on a GPU. Debian package
# versions are left to the base image's release (pinning breaks on security updates).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 kernelevolve \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /tmp --shell /usr/sbin/nologin kernelevolve

COPY --from=build /opt/venv /opt/venv

# Every writable path lives under /tmp, so the container also runs with a
# read-only root filesystem (Kubernetes mounts an emptyDir there).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    TRITON_CACHE_DIR=/tmp/.triton \
    KE_GRPC_HOST=0.0.0.0

WORKDIR /tmp
USER 10001:10001

# gRPC of gateway, search, synthesizer, evaluator, knowledge; Prometheus /metrics
# (KE_METRICS_ENABLED=true, KE_METRICS_PORT=9100 in the Kubernetes ConfigMap).
EXPOSE 50051 50052 50053 50054 50055 9100

CMD ["kernelevolve-gateway"]
