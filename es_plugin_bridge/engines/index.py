"""The embedded first-stage engine: an in-memory index scoring like Lucene 8, without a JVM.

Every (term, document) score is computed once at build time (as bm25s does), so a query is a
sum over a few rows of a sparse term-document matrix followed by a top-k selection.

Why not bm25s itself: its ``lucene`` method scores with exact document lengths (Lucene keeps a
lossy one-byte norm), in its own float order, it offers none of the language-model, DFR, IB or
TF-IDF similarities, and its top-k does not break ties by document order as Lucene does. The
same eager-scoring idea is kept; the scoring itself follows Lucene (see :mod:`.similarities`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from es_plugin_bridge.engines.norms import int_to_byte4
from es_plugin_bridge.engines.query_terms import query_terms
from es_plugin_bridge.engines.similarities import PostingStats, Similarity, make_similarity
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:  # imported where an index is built: listing the engines (--help) needs no scipy
    import scipy.sparse as sp


@dataclass(frozen=True)
class Postings:
    """Similarity-independent part of an index: vocabulary, term frequencies, norms."""

    vocabulary: dict[str, int]
    tf: sp.csr_matrix  # terms x documents, int32 counts, sorted document indices per row
    lengths: NDArray[np.int64]  # exact token count per document
    norms: NDArray[np.uint8]  # Lucene's lossy one-byte length per document

    @classmethod
    def from_tokens(cls, docs: Sequence[Sequence[str]]) -> Postings:
        import scipy.sparse as sp

        vocabulary: dict[str, int] = {}
        term_ids: list[int] = []
        lengths = np.zeros(len(docs), dtype=np.int64)
        for i, doc in enumerate(docs):
            if isinstance(doc, str):
                raise UserError(f"document {i} is a string; the engine indexes token lists")
            term_ids.extend(vocabulary.setdefault(token, len(vocabulary)) for token in doc)
            lengths[i] = len(doc)
        rows = np.asarray(term_ids, dtype=np.int64)
        cols = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
        tf = sp.csr_matrix(
            (np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(vocabulary), len(docs))
        )
        tf.sum_duplicates()
        tf.sort_indices()
        return cls(vocabulary, tf, lengths, int_to_byte4(lengths))

    def stats(self) -> PostingStats:
        """Collection, term and posting statistics as Lucene's similarities see them."""
        counts = np.diff(self.tf.indptr)
        return PostingStats(
            freq=self.tf.data.astype(np.float32),
            norm=self.norms[self.tf.indices],
            term=np.repeat(np.arange(self.tf.shape[0], dtype=np.int64), counts),
            doc_freq=counts.astype(np.int64),
            total_term_freq=np.asarray(self.tf.sum(axis=1), dtype=np.int64).ravel(),
            doc_count=int(np.count_nonzero(self.lengths)),
            sum_total_term_freq=int(self.lengths.sum()),
        )


class EmbeddedIndex:
    """Documents given as token lists, searchable with one of Lucene 8's similarities.

    A query is a bag of tokens scored like a Lucene ``BooleanQuery`` of one ``SHOULD``
    ``TermQuery`` per token: a repeated token counts once per occurrence, a query keeps at most
    ``query_terms.MAX_QUERY_TERMS`` distinct tokens (as every engine's query does), a document matching
    any token is a hit (even with score 0 under LM-Dirichlet), scores are float32, and equal
    scores rank the earlier document first.
    """

    def __init__(self, postings: Postings, similarity: Similarity, ids: Sequence[str]) -> None:
        self.postings = postings
        self.similarity = similarity
        self.ids = list(ids)
        self._row = {doc_id: i for i, doc_id in enumerate(self.ids)}
        if len(self._row) != len(self.ids):
            dup = next(d for d, n in Counter(self.ids).items() if n > 1)
            raise UserError(f"duplicate document id {dup!r}")
        tf = postings.tf
        self._indptr = tf.indptr
        self._indices = tf.indices
        self._stats = postings.stats()
        self._scores = similarity.score(self._stats) if tf.nnz else np.zeros(0, np.float32)

    @classmethod
    def build(
        cls,
        docs: Sequence[Sequence[str]],
        similarity: str = "bm25",
        ids: Sequence[str] | None = None,
        **params: Any,
    ) -> EmbeddedIndex:
        """Index ``docs`` (token lists) for one similarity.

        ``ids`` default to "0", "1", ...; ``params`` use Elasticsearch's names (``k1``, ``b``, ``mu``...).
        """
        sim = make_similarity(similarity, **params)  # validate before the costly part
        if ids is None:
            ids = [str(i) for i in range(len(docs))]
        elif len(ids) != len(docs):
            raise UserError(f"{len(ids)} ids given for {len(docs)} documents")
        return cls(Postings.from_tokens(docs), sim, ids)

    def with_similarity(self, similarity: str, **params: Any) -> EmbeddedIndex:
        """The same documents scored with another similarity, reusing the postings."""
        return EmbeddedIndex(self.postings, make_similarity(similarity, **params), self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def _term_stats(self, row: int) -> PostingStats:
        """The statistics of one term's postings, to rescore them with a boost."""
        stats, start, end = self._stats, self._indptr[row], self._indptr[row + 1]
        return replace(
            stats,
            freq=stats.freq[start:end],
            norm=stats.norm[start:end],
            term=np.zeros(end - start, dtype=np.int64),
            doc_freq=stats.doc_freq[row : row + 1],
            total_term_freq=stats.total_term_freq[row : row + 1],
        )

    def _accumulate(self, query_tokens: Iterable[str]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Per-document score sums (float64, as Lucene's disjunction) and the matched documents."""
        if isinstance(query_tokens, str):
            raise UserError("query_tokens is a string; pass a list of tokens")
        vocabulary, indptr = self.postings.vocabulary, self._indptr
        docs, weights = [], []
        for token, count in query_terms(query_tokens):  # at most MAX_QUERY_TERMS, as remote engines
            row = vocabulary.get(token)
            if row is None:
                continue
            start, end = indptr[row], indptr[row + 1]
            docs.append(self._indices[start:end])
            if count == 1:
                weights.append(self._scores[start:end].astype(np.float64))
            else:  # Lucene merges repeated clauses into one of boost `count`
                weights.append(self.similarity.score(self._term_stats(row), boost=count).astype(np.float64))
        n = len(self.ids)
        if not docs:
            return np.zeros(n), np.zeros(0, dtype=np.int64)
        if len(docs) == 1:
            total = np.zeros(n)
            total[docs[0]] = weights[0]
            return total, docs[0].astype(np.int64)
        all_docs = np.concatenate(docs)
        total = np.bincount(all_docs, weights=np.concatenate(weights), minlength=n)
        hits = np.flatnonzero(np.bincount(all_docs, minlength=n))
        return total, hits

    def search(
        self, query_tokens: Sequence[str], k: int = 10, exclude: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best documents as (id, score), best first; ids in ``exclude`` are skipped."""
        if k <= 0:
            return []
        total, hits = self._accumulate(query_tokens)
        if exclude:
            drop = [self._row[d] for d in exclude if d in self._row]
            if drop:
                hits = hits[~np.isin(hits, drop)]
        scores = total[hits].astype(np.float32)
        if len(hits) > k:
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            above = np.flatnonzero(scores > kth)
            tied = np.flatnonzero(scores == kth)[: k - len(above)]
            keep = np.concatenate([above, tied])
            hits, scores = hits[keep], scores[keep]
        order = np.lexsort((hits, -scores))
        return [(self.ids[hits[i]], float(scores[i])) for i in order]

    def score(self, query_tokens: Sequence[str], doc_ids: Sequence[str]) -> NDArray[np.float64]:
        """Scores of the given documents (0 for a document matching no query token)."""
        rows = []
        for doc_id in doc_ids:
            row = self._row.get(doc_id)
            if row is None:
                raise UserError(f"unknown document id {doc_id!r}")
            rows.append(row)
        total, _ = self._accumulate(query_tokens)
        return total[np.asarray(rows, dtype=np.int64)].astype(np.float32).astype(np.float64)
