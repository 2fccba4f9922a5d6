# syntax=docker/dockerfile:1
# clusterdoctor image: the node agent (`serve agent`), the scheduler extender (`serve extender`) and the
# CLI (`diagnose`, `collect`) for `kubectl exec` into the agent pod. Build: docker build -t clusterdoctor .
#
# Two stages: wheels are built and installed into a virtual environment in `build`; the final stage
# copies only that environment onto the same slim base — no compiler, no pip cache, no source tree.
# The base is pinned to an exact Python and Debian release (add @sha256:<digest> when you mirror it).
ARG PYTHON_IMAGE=python:3.12.8-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/clusterdoctor
COPY pyproject.toml constraints.txt README.md ./
COPY src ./src
# nvidia: NVML bindings (GPU UUIDs, per-process GPU use); k8s: the kubelet pod-resources gRPC client.
RUN /opt/clusterdoctor/bin/pip install --no-compile -c constraints.txt ".[nvidia,k8s]" \
 && /opt/clusterdoctor/bin/pip uninstall -y pip setuptools wheel

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="clusterdoctor" \
      org.opencontainers.image.description="Find out why a GPU training cluster got slow" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/clusterdoctor/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/clusterdoctor /opt/clusterdoctor
# Non-root by default (the extender, diagnose on files). The agent's DaemonSet sets runAsUser 0 with
# every capability dropped but SYS_PTRACE: the kubelet's pod-resources socket belongs to root.
USER 65532:65532
EXPOSE 9877 8888
ENTRYPOINT ["clusterdoctor"]
CMD ["--help"]
