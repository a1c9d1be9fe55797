"""One settings object for the sidecar: what ``esrerank serve`` was told, read by the app and the server.

``cli/serve.py`` builds a :class:`Settings` from its options; ``create_app(settings)`` loads the model
and sizes the service from it, and ``Server.for_app(app)`` binds, guards and caps requests from the same
object, so the token and the body cap the app checks cannot disagree with those the server checks.

The defaults are ``esrerank serve``'s, except the three that load the model (``onnx_threads``,
``batch_size``, ``device``) and ``encoder_workers``: those keep ``ModelDirectory.load``'s and the
request thread's own encoder calls, so ``create_app(path)`` in a test or a notebook loads and encodes
exactly as it always has, while the command passes its own measured defaults.
A value no server could use is a UserError naming the field and its option, before anything loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from es_plugin_bridge.bearer_token import check_token
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.request_deadline import MAX_DEADLINE_MS
from es_plugin_bridge.serving.deadline import DEFAULT_DEADLINE_MS
from es_plugin_bridge.serving.device import DEVICES, Device
from es_plugin_bridge.serving.server import Limits
from es_plugin_bridge.serving.service import DEFAULT_CACHE_SIZE
from es_plugin_bridge.serving.token_file import read_tokens

_LIMITS = Limits()
#: Requests in the queue per request thread by default: 128 with the 2 default threads. OpenSearch's own
#: processors fan out one call per document or hit (``text_embedding`` without ``batch_size``: one per
#: document of a ``_bulk``; the cross-encoder tutorial's ``ml_inference``: one per hit), up to the
#: connector's ``max_connection`` (30 by default) at once, each a text or a pair: a queue of a few
#: requests a thread refused those tutorials' own calls. The deadline (``--deadline-ms``) bounds the
#: time a queued request may wait; the queue bounds the memory held by bodies that wait.
QUEUE_PER_THREAD = 64
#: The ``esrerank serve`` option that sets each field (``max_body_bytes`` is given in MB there).
OPTIONS = {"model_dir": "MODEL_DIR", "host": "--host", "port": "--port", "token": "--token",
           "token_file": "--token-file", "max_queue": "--max-queue", "deadline_ms": "--deadline-ms",
           "expect_sha256": "--expect-sha256", "name": "--name", "max_documents": "--max-documents",
           "max_body_bytes": "--max-body-mb", "request_timeout": "--request-timeout",
           "max_connections": "--max-connections", "threads": "--threads", "onnx_threads": "--onnx-threads",
           "cache_size": "--cache-size", "batch_size": "--batch-size", "device": "--device",
           "encoder_workers": "--encoder-workers"}


@dataclass(frozen=True)
class Settings:
    """Everything one sidecar is told: the model to load, how to serve it, and what a client may cost."""

    model_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None  # None: no authentication; else required on all but OPEN_PATHS
    token_file: Path | None = None  # one token a line, re-read when it changes (serving.token_file)
    expect_sha256: str | None = None  # pins manifest.json itself (core.manifest)
    name: str | None = None  # the model name answers report (default TYPE:DIR)
    max_documents: int = 1000
    max_body_bytes: int = _LIMITS.max_body_bytes
    max_header_bytes: int = _LIMITS.max_header_bytes  # no option: waitress's cap, kept tight
    request_timeout: float = _LIMITS.request_timeout
    idle_timeout: float = _LIMITS.idle_timeout  # no option
    max_connections: int = _LIMITS.max_connections
    threads: int = 2  # waitress request threads
    onnx_threads: int | None = None  # None: onnxruntime's own choice
    cache_size: int = DEFAULT_CACHE_SIZE  # 0: no encoding cache
    batch_size: int = 64
    device: Device = "cpu"
    encoder_workers: int | None = None  # None: each request thread runs its own encoder calls
    max_queue: int | None = None  # None: QUEUE_PER_THREAD × threads (serving.admission)
    deadline_ms: int = DEFAULT_DEADLINE_MS  # a request without X-Request-Timeout-Ms (serving.deadline)

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_dir", Path(self.model_dir))
        check_token(self.token)
        if self.token_file is not None:
            object.__setattr__(self, "token_file", Path(self.token_file))
            read_tokens(self.token_file)  # a UserError naming the file or its bad line, before loading
        if self.max_queue is not None and self.max_queue < 1:
            self._refuse("max_queue", "must be at least 1 (or None: 64 × threads)")
        if not 1 <= self.deadline_ms <= MAX_DEADLINE_MS:
            self._refuse("deadline_ms", f"must be in 1..{MAX_DEADLINE_MS} milliseconds")
        if not 0 <= self.port <= 65535:
            self._refuse("port", "must be in 0..65535")
        for field in ("max_documents", "max_body_bytes", "max_header_bytes", "max_connections", "threads",
                      "batch_size"):
            if getattr(self, field) < 1:
                self._refuse(field, "must be at least 1")
        if self.onnx_threads is not None and self.onnx_threads < 1:
            self._refuse("onnx_threads", "must be at least 1 (or None: onnxruntime's choice)")
        if self.encoder_workers is not None and self.encoder_workers < 1:
            self._refuse("encoder_workers", "must be at least 1 (or None: each request thread encodes)")
        if self.cache_size < 0:
            self._refuse("cache_size", "must be at least 0 (0: no cache)")
        for field in ("request_timeout", "idle_timeout"):
            if not getattr(self, field) > 0:  # also refuses NaN
                self._refuse(field, "must be a positive number of seconds")
        if self.device not in DEVICES:
            self._refuse("device", f"must be one of {', '.join(DEVICES)}")

    def _refuse(self, field: str, rule: str) -> None:
        option = f" ({OPTIONS[field]})" if field in OPTIONS else ""
        raise UserError(f"setting {field}{option} {rule}, not {getattr(self, field)!r}")

    @property
    def guarded(self) -> bool:
        """Whether requests need a bearer token (``--token`` or ``--token-file``)."""
        return bool(self.token) or self.token_file is not None

    @property
    def queue_limit(self) -> int:
        """Scoring requests in at once at most: ``max_queue``, else ``QUEUE_PER_THREAD`` × threads."""
        return self.max_queue if self.max_queue is not None else QUEUE_PER_THREAD * self.threads

    @property
    def limits(self) -> Limits:
        """What one client may cost the server (waitress's caps and timeouts, the queue's bound)."""
        return Limits(max_body_bytes=self.max_body_bytes, max_header_bytes=self.max_header_bytes,
                      request_timeout=self.request_timeout, idle_timeout=self.idle_timeout,
                      max_connections=self.max_connections, max_queue=self.queue_limit)


#: The fields that only matter while loading a model directory (meaningless for a loaded one).
LOAD_FIELDS = ("model_dir", "expect_sha256", "onnx_threads", "batch_size", "device")
