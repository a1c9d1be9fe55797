"""Embedded first-stage retrieval scoring exactly like Lucene 8 (BM25, LM, DFR, IB, TF-IDF), and the
registry of first-stage engines (:mod:`.registry`).

``lucene`` (the jpype bridge to real Lucene, for parity tests and benchmarks) is not re-exported here:
it needs a JVM to run and jpype is a development dependency only (importing the module loads neither).
"""

from es_plugin_bridge.engines.index import EmbeddedIndex, Postings
from es_plugin_bridge.engines.similarities import SIMILARITIES, Similarity, make_similarity

__all__ = ["SIMILARITIES", "EmbeddedIndex", "Postings", "Similarity", "make_similarity"]
