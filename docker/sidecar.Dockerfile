# The sidecar image: `esrerank serve` on an exported model directory mounted read-only at /model.
# Serving dependencies only: the package's base install (`pip install .`, here as a wheel built in the
# first stage) has no torch, and nothing else is added. Runs as an unprivileged user (uid 10001).
#
#   docker build -f docker/sidecar.Dockerfile -t esrerank-sidecar .
#   docker build -f docker/sidecar.Dockerfile --build-arg GPU=1 -t esrerank-sidecar:gpu .
#   docker run -p 8080:8080 -v "$PWD/runs/demo/model-onnx:/model:ro" -e ESRERANK_TOKEN=secret esrerank-sidecar
#
# GPU=1 replaces onnxruntime by onnxruntime-gpu (CUDA 12, cuDNN 9 from NVIDIA's pip wheels, made
# visible to the dynamic loader); run it with `--gpus all`. The scorer must also ask onnxruntime for
# the CUDA provider (es_plugin_bridge/serving/model_dir.py), or the GPU build still scores on the CPU.
#
# Target `tools` (used by the compose stack's one-shot setup service) is the same install plus the
# `elastic` extra, for `esrerank es setup|index|evaluate` and `esrerank kibana import`.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY es_plugin_bridge ./es_plugin_bridge
COPY exporters ./exporters
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim AS runtime
ARG GPU=0
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl \
 && if [ "$GPU" = "1" ]; then \
      pip uninstall -y onnxruntime \
      && pip install "onnxruntime-gpu[cuda,cudnn]>=1.20" \
      && python -c "import glob, site; print('\n'.join(sorted(glob.glob(site.getsitepackages()[0] + '/nvidia/*/lib'))))" \
         > /etc/ld.so.conf.d/nvidia-pip.conf \
      && ldconfig; \
    fi \
 && rm -rf /wheels \
 && useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin esrerank
WORKDIR /tmp

FROM runtime AS tools
# The `elastic` extra: the Elasticsearch client and what `es evaluate` needs (no torch).
COPY --from=build /wheels /wheels
RUN pip install "$(ls /wheels/*.whl)[elastic]" && rm -rf /wheels
COPY docker/setup.sh /usr/local/bin/esrerank-setup
RUN chmod 0755 /usr/local/bin/esrerank-setup
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/esrerank-setup"]

FROM runtime AS sidecar
USER 10001:10001
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
# Inside a container the port must be bound on all interfaces; set ESRERANK_TOKEN to require a bearer token.
ENTRYPOINT ["esrerank", "serve", "/model", "--host", "0.0.0.0", "--port", "8080"]
