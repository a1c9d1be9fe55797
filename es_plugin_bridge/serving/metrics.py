"""Prometheus metrics of one sidecar app (its own registry, so apps never share counters)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, Info


class Metrics:
    def __init__(self, model_name: str, model_type: str) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("esrerank_requests", "HTTP requests by endpoint and status",
                                ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("esrerank_request_seconds", "Request latency by endpoint", ["endpoint"],
                                 registry=self.registry,
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.documents = Counter("esrerank_documents_scored", "Documents or texts encoded",
                                 ["endpoint"], registry=self.registry)
        Info("esrerank_model", "The served model", registry=self.registry).info(
            {"name": model_name, "type": model_type})
