"""A bridge to real Lucene 8 through jpype, to check and time the embedded engine against it.

Used by the parity test and the benchmark only (jpype and Debian's ``liblucene8-java`` are
development dependencies). Documents are pre-tokenised: tokens are joined by spaces and split
again by a ``WhitespaceAnalyzer``, so both engines index exactly the same terms; a query is a
``BooleanQuery`` of one ``SHOULD`` ``TermQuery`` per token, built by Lucene's ``QueryBuilder`` as
Elasticsearch's ``match`` query does.
The index lives in memory (``ByteBuffersDirectory``) as one segment in insertion order, so
Lucene's document numbers are the positions of the documents given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from es_plugin_bridge import jvm
from es_plugin_bridge.engines.query_terms import bounded_tokens
from es_plugin_bridge.engines.similarities import Similarity, make_similarity
from es_plugin_bridge.jvm import LUCENE

FIELD = "body"
_MAX_TERM_BYTES = 32766  # Lucene's IndexWriter.MAX_TERM_LENGTH
_MAX_TOKEN_CHARS = 1024 * 1024  # CharTokenizer's limit; longer tokens would be split silently


def lucene_jars() -> list[str]:
    """The jar files needed, from ``$LUCENE_JAR_DIR`` or /usr/share/java; [] if any is missing."""
    return LUCENE.paths()


def unavailable_reason() -> str | None:
    """Why real Lucene cannot run here (None when it can): no jpype, no jars, or no JVM."""
    return LUCENE.missing_reason()


def start_jvm() -> None:
    """Start the JVM with Lucene on its class path (once per process, as jpype allows); the class
    path also holds the other checks' jars (``es_plugin_bridge.jvm``), whichever test starts it."""
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    jvm.start_jvm()


def _j(name: str) -> Any:
    import jpype

    return jpype.JClass(name)


def lucene_similarity(similarity: Similarity | str, **params: Any) -> Any:
    """The Lucene object equal to one of our similarities (same names and parameters)."""
    from jpype import JFloat

    sim = similarity if isinstance(similarity, Similarity) else make_similarity(similarity, **params)
    p, pkg = sim.params, "org.apache.lucene.search.similarities."
    if sim.name == "bm25":
        return _j(pkg + "BM25Similarity")(JFloat(p["k1"]), JFloat(p["b"]))
    if sim.name == "lmdirichlet":
        return _j(pkg + "LMDirichletSimilarity")(JFloat(p["mu"]))
    if sim.name == "lmjelinekmercer":
        return _j(pkg + "LMJelinekMercerSimilarity")(JFloat(p["lambda"]))
    if sim.name == "tfidf":
        return _j(pkg + "ClassicSimilarity")()
    norm = {
        "no": lambda: _j(pkg + "Normalization$NoNormalization")(),
        "h1": lambda: _j(pkg + "NormalizationH1")(JFloat(p["normalization.h1.c"])),
        "h2": lambda: _j(pkg + "NormalizationH2")(JFloat(p["normalization.h2.c"])),
        "h3": lambda: _j(pkg + "NormalizationH3")(JFloat(p["normalization.h3.c"])),
        "z": lambda: _j(pkg + "NormalizationZ")(JFloat(p["normalization.z.z"])),
    }[p["normalization"]]()
    if sim.name == "dfr":
        model = {"g": "G", "if": "IF", "in": "In", "ine": "Ine"}[p["basic_model"]]
        after = {"b": "B", "l": "L"}[p["after_effect"]]
        return _j(pkg + "DFRSimilarity")(
            _j(pkg + "BasicModel" + model)(), _j(pkg + "AfterEffect" + after)(), norm
        )
    if sim.name == "ib":
        dist = {"ll": "LL", "spl": "SPL"}[p["distribution"]]
        lam = {"df": "DF", "ttf": "TTF"}[p["lambda"]]
        return _j(pkg + "IBSimilarity")(_j(pkg + "Distribution" + dist)(), _j(pkg + "Lambda" + lam)(), norm)
    raise ValueError(f"no Lucene counterpart for {sim.name!r}")


def _check_token(token: str) -> None:
    if not token or token != token.strip() or len(token.split()) != 1:
        raise ValueError(f"token {token!r} is empty or holds whitespace; it would not survive the analyzer")
    if len(token) > _MAX_TOKEN_CHARS or len(token.encode("utf-8")) > _MAX_TERM_BYTES:
        raise ValueError(f"token of {len(token)} characters is longer than Lucene accepts")


class LuceneIndex:
    """Pre-tokenised documents in an in-memory Lucene 8 index, searched with one similarity."""

    def __init__(self, docs: Sequence[Sequence[str]], similarity: str = "bm25", **params: Any) -> None:
        start_jvm()
        self.similarity = make_similarity(similarity, **params)
        java_sim = lucene_similarity(self.similarity)
        _j("org.apache.lucene.search.BooleanQuery").setMaxClauseCount(1 << 16)
        self._directory = _j("org.apache.lucene.store.ByteBuffersDirectory")()
        analyzer = _j("org.apache.lucene.analysis.core.WhitespaceAnalyzer")(_MAX_TOKEN_CHARS)
        config = _j("org.apache.lucene.index.IndexWriterConfig")(analyzer)
        config.setSimilarity(java_sim)
        config.setRAMBufferSizeMB(512.0)
        config.setMergePolicy(_j("org.apache.lucene.index.LogDocMergePolicy")())  # keeps doc order
        writer = _j("org.apache.lucene.index.IndexWriter")(self._directory, config)
        document_cls, text_field = (
            _j("org.apache.lucene.document.Document"),
            _j("org.apache.lucene.document.TextField"),
        )
        no = _j("org.apache.lucene.document.Field$Store").NO
        for tokens in docs:
            for token in tokens:
                _check_token(token)
            document = document_cls()
            document.add(text_field(FIELD, " ".join(tokens), no))
            writer.addDocument(document)
        writer.forceMerge(1)
        writer.close()
        self.reader = _j("org.apache.lucene.index.DirectoryReader").open(self._directory)
        if self.reader.leaves().size() > 1:
            raise RuntimeError("Lucene index has more than one segment; document numbers would not match")
        self.searcher = _j("org.apache.lucene.search.IndexSearcher")(self.reader)
        self.searcher.setSimilarity(java_sim)
        self._query_builder = _j("org.apache.lucene.util.QueryBuilder")(analyzer)
        self._empty_query = _j("org.apache.lucene.search.BooleanQuery$Builder")().build()

    def with_similarity(self, similarity: str, **params: Any) -> LuceneIndex:
        """The same index searched with another similarity, without re-indexing.

        Valid in Lucene 8 because every similarity here stores the same norm
        (``SmallFloat.intToByte4`` of the token count).
        """
        view = object.__new__(LuceneIndex)
        view.__dict__.update(self.__dict__)
        view.similarity = make_similarity(similarity, **params)
        view.searcher = _j("org.apache.lucene.search.IndexSearcher")(self.reader)
        view.searcher.setSimilarity(lucene_similarity(view.similarity))
        return view

    def norms(self) -> list[int]:
        """The norm byte Lucene stored for each document (0 for a document without tokens)."""
        leaf = self.reader.leaves().get(0).reader()
        values = leaf.getNormValues(FIELD)
        norms = [0] * len(self)
        doc = values.nextDoc()
        while doc != values.NO_MORE_DOCS:
            norms[doc] = int(values.longValue()) & 0xFF
            doc = values.nextDoc()
        return norms

    def collection_stats(self) -> tuple[int, int]:
        """Lucene's (docCount, sumTotalTermFreq) of the field."""
        stats = self.searcher.collectionStatistics(FIELD)
        return int(stats.docCount()), int(stats.sumTotalTermFreq())

    def __len__(self) -> int:
        return int(self.reader.maxDoc())

    def query(self, tokens: Sequence[str]) -> Any:
        """One SHOULD TermQuery per token (repeats included), built by Lucene's ``QueryBuilder``.

        This is what Elasticsearch's ``match`` query does with an analysed string (the tokens bounded
        as every first stage bounds them: ``query_terms.bounded_tokens``); a single
        token gives a bare TermQuery, no token a query matching nothing.
        """
        for token in tokens:
            _check_token(token)
        query = self._query_builder.createBooleanQuery(FIELD, " ".join(bounded_tokens(tokens)))
        return self._empty_query if query is None else query

    def search_query(self, query: Any, k: int = 10) -> list[tuple[int, float]]:
        """Run a prepared query: (document number, float score), best first."""
        hits = self.searcher.search(query, k).scoreDocs
        return [(int(hit.doc), float(hit.score)) for hit in hits]

    def search(self, tokens: Sequence[str], k: int = 10) -> list[tuple[int, float]]:
        return self.search_query(self.query(tokens), k)

    def explain(self, tokens: Sequence[str], doc: int) -> str:
        """Lucene's own account of a document's score, for debugging a mismatch."""
        return str(self.searcher.explain(self.query(tokens), doc).toString())

    def close(self) -> None:
        self.reader.close()
        self._directory.close()
