"""Neural reranker for semantically equivalent questions, plugged into Elasticsearch."""

__version__ = "0.1.0"
