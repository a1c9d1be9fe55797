"""Two pieces of the Elasticsearch modes checked on real Lucene 8 (Debian's liblucene8-java, via jpype).

Elasticsearch's ``rank_features`` field indexes Lucene ``FeatureField``s and its ``rank_feature``
query with ``linear`` is ``FeatureField.newLinearQuery``; its ``bool`` is a Lucene ``BooleanQuery``.
So on SemEval-2016 dev with the tiny exported bow-cnn (learned, signed BOW weights):

- the BOW features the bridge stores and the query weights it sends give, in real Lucene, the model's
  BOW cosine up to FeatureField's 9-bit truncation (the mode vectors' β_bow term);
- the rerank first stage, ``bool{should: match, filter: ids}``, scores every candidate as the embedded
  engine's ``score`` does, a candidate sharing no token included with score 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.engines.lucene import unavailable_reason

pytestmark = pytest.mark.lucene
_REASON = unavailable_reason()
if _REASON:
    pytest.skip(f"real Lucene unavailable: {_REASON}", allow_module_level=True)

from es_plugin_bridge.data.spec import read_spec  # noqa: E402
from es_plugin_bridge.elastic import mappings  # noqa: E402
from es_plugin_bridge.engines.embedded import EmbeddedEngine  # noqa: E402
from es_plugin_bridge.engines.lucene import _j, lucene_similarity, start_jvm  # noqa: E402
from es_plugin_bridge.engines.similarities import make_similarity  # noqa: E402
from es_plugin_bridge.rankers import unique_questions  # noqa: E402
from es_plugin_bridge.serving import ModelDirectory  # noqa: E402
from es_plugin_bridge.serving.app import create_app  # noqa: E402
from es_plugin_bridge.text import Preprocessor  # noqa: E402
from es_plugin_bridge.text.sidecar_text import rerank_text  # noqa: E402

SEMEVAL_DEV = (
    Path(__file__).resolve().parents[2]
    / "es_plugin_bridge"
    / "samples"
    / "semeval2016-task3"
    / "SemEval2016-Task3-CQA-QL-dev.xml"
)


@pytest.fixture(scope="module")
def data():
    start_jvm()
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    return queries, unique_questions([q.candidates for q in queries])


def _index(documents):
    """An in-memory one-segment Lucene index with BM25; ``documents`` are lists of Lucene fields."""
    start_jvm()
    directory = _j("org.apache.lucene.store.ByteBuffersDirectory")()
    config = _j("org.apache.lucene.index.IndexWriterConfig")(
        _j("org.apache.lucene.analysis.core.WhitespaceAnalyzer")()
    )
    config.setSimilarity(lucene_similarity(make_similarity("bm25")))
    config.setMergePolicy(_j("org.apache.lucene.index.LogDocMergePolicy")())
    writer = _j("org.apache.lucene.index.IndexWriter")(directory, config)
    for fields in documents:
        doc = _j("org.apache.lucene.document.Document")()
        for field in fields:
            doc.add(field)
        writer.addDocument(doc)
    writer.forceMerge(1)
    writer.close()
    searcher = _j("org.apache.lucene.search.IndexSearcher")(
        _j("org.apache.lucene.index.DirectoryReader").open(directory)
    )
    searcher.setSimilarity(lucene_similarity(make_similarity("bm25")))
    return searcher


def _scores(searcher, query, n: int) -> dict[int, float]:
    return {int(h.doc): float(h.score) for h in searcher.search(query, max(n, 1)).scoreDocs}


def _bool(*clauses):
    builder = _j("org.apache.lucene.search.BooleanQuery$Builder")()
    occur = _j("org.apache.lucene.search.BooleanClause$Occur")
    for kind, query in clauses:
        builder.add(query, getattr(occur, kind))
    return builder.build()


def test_rank_features_in_lucene_give_the_bow_cosine(exported, data):
    queries, collection = data
    app = create_app(ModelDirectory.load(exported["bow-cnn"], threads=1))
    client, model = app.test_client(), app.extensions["esrerank"].model

    def embed(questions):
        resp = client.post("/v1/encode", json={"texts": [rerank_text(q) for q in questions]})
        return resp.json["embeddings"]

    feature = _j("org.apache.lucene.document.FeatureField")
    docs = []
    for emb in embed(collection):
        docs.append([feature("bow", k, float(v)) for k, v in mappings.bow_features(emb["terms"]).items()])
    searcher = _index(docs)
    row = {q.id: i for i, q in enumerate(collection)}
    match_all = _j("org.apache.lucene.search.MatchAllDocsQuery")()
    checked = 0
    for rq in queries:
        terms = embed([rq.query])[0]["terms"]
        clauses = [
            ("SHOULD", feature.newLinearQuery("bow", mappings.feature_key(t), float(abs(w))))
            for t, w in terms.items()
            if abs(w) > 0
        ]
        got = _scores(searcher, _bool(("FILTER", match_all), *clauses), len(collection))
        want = model.rerank(rq.query, rq.candidates)["bow"]
        for cand, exact in zip(rq.candidates, want, strict=True):
            lucene = got.get(row[cand.id], 0.0)
            # FeatureField keeps 9 significant bits of each stored value (truncated), scores are float32
            assert exact * (1 - 2**-8) - 1e-6 <= lucene <= exact + 1e-6, (rq.query.id, cand.id, lucene, exact)
            checked += 1
    assert checked == sum(len(q.candidates) for q in queries)


def test_rerank_first_stage_scores_every_candidate_like_the_embedded_engine(data):
    from jpype import JArray

    queries, collection = data
    pre = Preprocessor()
    text, string = _j("org.apache.lucene.document.TextField"), _j("org.apache.lucene.document.StringField")
    no = _j("org.apache.lucene.document.Field$Store").NO
    searcher = _index(
        [[text("text", " ".join(pre.tokens(q)), no), string("id", q.id, no)] for q in collection]
    )
    engine = EmbeddedEngine(pre.tokens)
    engine.index(collection)
    stage = engine.first_stage("bm25")
    row = {q.id: i for i, q in enumerate(collection)}
    builder = _j("org.apache.lucene.util.QueryBuilder")(
        _j("org.apache.lucene.analysis.core.WhitespaceAnalyzer")()
    )
    bytes_ref = _j("org.apache.lucene.util.BytesRef")
    zero_score_candidates = 0
    for rq in queries:
        ids = [c.id for c in rq.candidates]
        match = builder.createBooleanQuery("text", " ".join(pre.tokens(rq.query)))
        only = _j("org.apache.lucene.search.TermInSetQuery")(
            "id", JArray(bytes_ref)([bytes_ref(i) for i in ids])
        )
        clauses = [("FILTER", only)] + ([("SHOULD", match)] if match is not None else [])
        got = _scores(searcher, _bool(*clauses), len(ids))
        assert sorted(got) == sorted(row[i] for i in ids)  # every candidate comes back
        want = stage.score(rq.query, ids)
        lucene = np.array([got[row[i]] for i in ids])
        np.testing.assert_allclose(lucene, want, rtol=1e-5, atol=1e-7)
        zero_score_candidates += int((want == 0).sum())
    assert zero_score_candidates > 0  # the filter path is exercised: candidates sharing no token
