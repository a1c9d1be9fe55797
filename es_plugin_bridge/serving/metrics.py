"""Prometheus metrics of one sidecar app (its own registry, so apps never share counters).

Rejected requests are counted by reason and logged once each, whoever refused them (waitress before
the app for a missing token or an oversized body, the app for the rest): an endpoint registered with a
wrong token then shows on the sidecar's side, not only as failed searches elsewhere. The log line names
the method, path, client address, status, reason and message; never a header (so never the token).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from es_plugin_bridge.serving.batching import EncoderPool
from es_plugin_bridge.serving.cache import EncodingCache

log = logging.getLogger("esrerank.sidecar")

#: The ``reason`` of a rejection by status, where the refuser gives none more precise.
REASONS = {400: "invalid", 401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
           408: "request_timeout", 413: "body_too_large", 415: "unsupported_media_type",
           431: "headers_too_large"}


def printable(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with control characters escaped: one log line, always."""
    cut = text[:limit] + ("…" if len(text) > limit else "")
    return cut.encode("unicode_escape").decode("ascii") if not cut.isprintable() else cut


class _CacheCollector(Collector):
    """The encoding cache's own counters, read when /metrics is scraped (no second bookkeeping)."""

    def __init__(self, cache: EncodingCache) -> None:
        self.cache = cache

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        yield CounterMetricFamily("esrerank_encoding_cache_hits", "Encodings found in the cache",
                                  value=self.cache.hits)
        yield CounterMetricFamily("esrerank_encoding_cache_misses", "Encodings computed (not in the cache)",
                                  value=self.cache.misses)
        yield GaugeMetricFamily("esrerank_encoding_cache_entries", "Encodings held", value=len(self.cache))
        yield GaugeMetricFamily("esrerank_encoding_cache_capacity", "Most encodings held",
                                value=self.cache.capacity)


class _EncoderCollector(Collector):
    """The shared encoder workers' counters: rows / calls is the batch onnxruntime really gets, and
    merged calls show concurrent requests batched together."""

    def __init__(self, pool: EncoderPool) -> None:
        self.pool = pool

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        yield CounterMetricFamily("esrerank_encoder_calls", "onnxruntime calls run by the encoder workers",
                                  value=self.pool.calls)
        yield CounterMetricFamily("esrerank_encoder_rows", "Questions encoded by those calls",
                                  value=self.pool.rows)
        yield CounterMetricFamily("esrerank_encoder_merged_calls",
                                  "Calls that held the questions of more than one request",
                                  value=self.pool.merged)
        yield GaugeMetricFamily("esrerank_encoder_workers", "Encoder calls run at once at most",
                                value=self.pool.workers)


class Metrics:
    def __init__(self, model_name: str, model_type: str, cache: EncodingCache | None = None,
                 provider: str = "CPUExecutionProvider", encoder: EncoderPool | None = None) -> None:
        self.registry = CollectorRegistry()
        if cache is not None:
            self.registry.register(_CacheCollector(cache))
        if encoder is not None:
            self.registry.register(_EncoderCollector(encoder))
        self.requests = Counter("esrerank_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("esrerank_request_seconds", "Request latency by endpoint", ["endpoint"],
                                 registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.documents = Counter("esrerank_documents_scored", "Documents or texts encoded",
                                 ["endpoint"], registry=self.registry)
        self.unscored = Counter("esrerank_documents_unscored",
                                "Rerank documents not scored (lowest score), by reason (null, blank, "
                                "too_long)", ["reason"], registry=self.registry)
        self.rejected = Counter("esrerank_requests_rejected",
                                "Requests refused with a 4xx, or a 503 when the queue is full (before or "
                                "by the app), by reason and status", ["reason", "status"],
                                registry=self.registry)
        self.dropped = Counter("esrerank_work_dropped",
                               "Requests whose work stopped at their deadline or when their client left, "
                               "answered 504 (predicted_late: 503), by where (before_start, before_batch, "
                               "predicted_late_batch: never computed further; "
                               "finished_late: computed for nobody)", ["stage"], registry=self.registry)
        Info("esrerank_model", "The served model", registry=self.registry).info(
            {"name": model_name, "type": model_type, "provider": provider})

    def drop(self, stage: str, method: str, path: str, client: str, message: str) -> None:
        """Count one request whose work was dropped (``serving.deadline``) and log it in one line."""
        self.dropped.labels(stage).inc()
        log.warning("dropped %s %s from %s: 504 %s (%s)", printable(method, 16), printable(path),
                    printable(client, 64), stage, printable(message))

    def reject(self, status: int, reason: str | None, method: str, path: str, client: str,
               message: str) -> None:
        """Count one refused request and log it in one line (``reason`` None: from the status)."""
        reason = reason or REASONS.get(status, f"http_{status}")
        self.rejected.labels(reason, str(status)).inc()
        log.warning("rejected %s %s from %s: %d %s (%s)", printable(method, 16), printable(path),
                    printable(client, 64), status, reason, printable(message))
