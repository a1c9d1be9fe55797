"""Prometheus metrics of one sidecar app (its own registry, so apps never share counters)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from es_plugin_bridge.serving.cache import EncodingCache


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


class Metrics:
    def __init__(self, model_name: str, model_type: str, cache: EncodingCache | None = None) -> None:
        self.registry = CollectorRegistry()
        if cache is not None:
            self.registry.register(_CacheCollector(cache))
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
        Info("esrerank_model", "The served model", registry=self.registry).info(
            {"name": model_name, "type": model_type})
