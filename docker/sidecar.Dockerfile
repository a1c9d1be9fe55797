# The sidecar image: `esrerank serve` on an exported model directory mounted at /model.
# onnxruntime (CPU) only: the package's base install has no torch.
#   docker build -f docker/sidecar.Dockerfile -t esrerank-sidecar .
#   docker run -p 8080:8080 -v "$PWD/runs/demo/model-onnx:/model:ro" -e ESRERANK_TOKEN=secret esrerank-sidecar
FROM python:3.11-slim

WORKDIR /src
COPY pyproject.toml README.md ./
COPY es_plugin_bridge ./es_plugin_bridge
COPY exporters ./exporters
RUN pip install --no-cache-dir . && useradd --system --no-create-home esrerank

USER esrerank
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"
# Inside a container the port must be bound on all interfaces; set ESRERANK_TOKEN to require a bearer token.
ENTRYPOINT ["esrerank", "serve", "/model", "--host", "0.0.0.0", "--port", "8080"]
