"""``es setup --from-index`` on a real OpenSearch 2.19.1 node: the questions of a user's own index, copied
into the product's layout by ``_reindex`` or extended in place by ``_update_by_query``, embedded by
OpenSearch through the index's ingest pipeline (ml-commons and neural-search calling the sidecar).

Their index here is what a forum has: its own field names (``question.title``, ``question.text``, an id
field ``qid``), its own analyzer (English stemming), its own ``_meta``; the questions are real AskUbuntu
questions whose bodies carry HTML and shell snippets (``<code>``, ``$``, pipes, quotes).

What holds, and why it must:

- the copy holds every question under its ``qid``, each with the sidecar's own vector and BOW terms for
  its ``rerank_text`` (:data:`es_commands.VECTOR_TOLERANCE`), and ``rerank_text`` is the product's own
  string (the Painless script restates ``rerank_text``); their index is not touched;
- in place, their documents and ``_meta`` stay and gain the same fields. Their index is not a k-NN
  index and ``index.knn`` is static (k-NN 2.19.1 ``KNNSettings``: ``IndexScope``, no ``Dynamic``), so the
  vector is added as the k-NN plugin's flat ``knn_vector`` (``FlatVectorFieldMapper``: no method, no
  graph); ``--knn hnsw`` is refused in one line, and exact scoring reads it as it reads a graph's field;
- both give the same ranking in every mode: the same text under the same analyzer with the same BM25
  (k1 1.2, b 0.75: the product's and OpenSearch's default; the first stage's statistics count only the
  documents that have the field, and the versions ``_update_by_query`` replaced never had it), and
  the same vectors.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from es_commands import assert_stored_as_embedded, common, embeddings, run, sources

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question

pytestmark = [pytest.mark.engine, pytest.mark.slow]

VAL = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
THEIRS = "forum"
COPY = "forum-reranked"
FIELDS = ["--from-index", THEIRS, "--title-field", "question.title", "--body-field", "question.text"]
MODES = ("learned-hybrid", "vectors", "hybrid", "hybrid-rrf", "rerank", "bridge")
THEIR_META = {"owner": "forum-team", "schema": 3}


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    """400 AskUbuntu questions with bodies; over a third hold a ``<code>`` snippet."""
    found = list(read_spec(f"pairs:{VAL}").questions.values())[:400]
    assert sum("<code>" in q.body for q in found) > 130
    return found


@pytest.fixture(scope="module")
def forum(opensearch, sidecar, questions) -> dict[str, str]:
    """Their index, then ``es setup`` copying it and extending it in place; their ``_id`` → ``qid``."""
    url, model = sidecar
    opensearch.ok("PUT", f"/{THEIRS}", {
        "settings": {"number_of_shards": 1, "analysis": {"analyzer": {"forum_en": {"type": "english"}}}},
        "mappings": {"_meta": THEIR_META, "properties": {
            "question": {"properties": {"title": {"type": "text", "analyzer": "forum_en"},
                                        "text": {"type": "text", "analyzer": "forum_en"}}},
            "qid": {"type": "keyword"}}}})
    lines = []
    for i, q in enumerate(questions):
        lines += [{"index": {"_index": THEIRS, "_id": f"doc-{i}"}},
                  {"question": {"title": q.title, "text": q.body}, "qid": q.id}]
    answer = opensearch.ok("POST", "/_bulk?refresh=true",
                           "".join(json.dumps(line) + "\n" for line in lines).encode())
    assert not answer["errors"]
    assert run(["es", "setup", str(model), "--index", COPY, *FIELDS, "--id-field", "qid", "--no-progress",
                *common(opensearch, url)]) == 0
    assert run(["es", "setup", str(model), *FIELDS, "--in-place", "--no-progress",
                *common(opensearch, url)]) == 0
    return {f"doc-{i}": q.id for i, q in enumerate(questions)}


def test_the_copy_holds_every_question_with_the_sidecars_vectors(forum, opensearch, sidecar, questions):
    url, _ = sidecar
    stored = sources(opensearch, COPY)
    assert set(stored) == {q.id for q in questions}  # their qid became the id
    wanted = embeddings(url, questions)
    for q in questions:
        assert_stored_as_embedded(stored[q.id], wanted[q.id], q)
    mapping = opensearch.ok("GET", f"/{COPY}/_mapping")[COPY]["mappings"]
    assert mapping["properties"]["text"]["analyzer"] == "forum_en"  # their analyzer is the first stage's
    assert "method" in mapping["properties"]["vector"]  # the copy is a k-NN index: an HNSW graph
    theirs = opensearch.ok("GET", f"/{THEIRS}/_count")["count"]
    assert theirs == len(questions)


def test_in_place_their_documents_and_meta_stay_and_gain_the_fields(forum, opensearch, sidecar, questions):
    url, _ = sidecar
    mapping = opensearch.ok("GET", f"/{THEIRS}/_mapping")[THEIRS]["mappings"]
    assert {key: mapping["_meta"][key] for key in THEIR_META} == THEIR_META
    assert mapping["_meta"]["esrerank"]["source"]["hnsw"] is False
    vector = mapping["properties"]["vector"]
    assert vector["type"] == "knn_vector" and "method" not in vector  # flat: doc values, no graph
    stored = sources(opensearch, THEIRS)
    assert set(stored) == set(forum)
    wanted = embeddings(url, questions)
    by_qid = {q.id: q for q in questions}
    for doc_id, source in stored.items():
        q = by_qid[forum[doc_id]]
        assert source["question"] == {"title": q.title, "text": q.body} and source["qid"] == q.id
        assert_stored_as_embedded(source, wanted[q.id], q)


def test_hnsw_is_refused_in_one_line_where_their_index_has_no_graph(forum, opensearch, sidecar, cli):
    url, _ = sidecar
    code, out, err = cli(["es", "search", "grub does not boot", "--mode", "hybrid", "--knn", "hnsw",
                          "--index", THEIRS, *common(opensearch, url)])
    assert code != 0 and "Traceback" not in err
    assert "--knn hnsw cannot search index forum: the vectors were added in place to forum" in err
    assert "use --knn exact" in err
    code, _, err = cli(["es", "search", "grub does not boot", "--mode", "hybrid", "--knn", "hnsw",
                        "--index", COPY, *common(opensearch, url)])
    assert code == 0, err  # the copy has its graph


def search(cli, opensearch, url: str, index: str, text: str, mode: str) -> list[tuple[str, float]]:
    code, out, err = cli(["es", "search", "--mode", mode, "--json", "--index", index, "--top", "10",
                          *common(opensearch, url), "--", text])
    assert code == 0, (text, err)
    answer = json.loads(out)
    assert answer["reranked"] is True, answer
    return [(hit["id"], hit["score"]) for hit in answer["hits"]]


def same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> bool:
    """The same scores (1e-5: float32 noise), and the same id at every place whose score is not tied
    with a neighbour's (the last place may be tied with the unseen next one)."""
    if len(got) != len(want) or not np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5):
        return False
    scores = [s for _, s in want]
    for i, ((a, _), (b, _)) in enumerate(zip(got, want, strict=True)):
        neighbours = [j for j in (i - 1, i + 1) if 0 <= j < len(scores)]
        tied = i == len(scores) - 1 or any(abs(scores[i] - scores[j]) <= 1e-5 for j in neighbours)
        if a != b and not tied:
            return False
    return True


@pytest.mark.parametrize("mode", MODES)
def test_the_copy_and_their_index_in_place_rank_alike(forum, opensearch, sidecar, questions, cli, mode):
    url, _ = sidecar
    texts = [q.title for q in questions[::40]]  # 10 queries, shell snippets among them
    differ = {}
    for text in texts:
        copy = search(cli, opensearch, url, COPY, text, mode)
        in_place = [(forum[doc], score) for doc, score in search(cli, opensearch, url, THEIRS, text, mode)]
        assert copy, text
        if not same_ranking(in_place, copy):
            differ[text] = (in_place, copy)
    assert differ == {}


def test_a_model_without_vectors_gets_the_text_scripts_only(forum, opensearch, sidecar, cli):
    url, model = sidecar
    code, out, err = cli(["es", "setup", str(model), "--index", "forum-text", *FIELDS, "--no-vectors",
                          "--no-progress", *common(opensearch, url)])
    assert code == 0, err
    assert "ingest pipeline forum-text-embed: text and rerank_text from your fields" in out
    pipeline = opensearch.ok("GET", "/_ingest/pipeline/forum-text-embed")["forum-text-embed"]
    assert [next(iter(p)) for p in pipeline["processors"]] == ["script", "html_strip", "script"]
    code, out, err = cli(["es", "search", "grub does not boot", "--mode", "rerank", "--json",
                          "--index", "forum-text", *common(opensearch, url)])
    assert code == 0 and json.loads(out)["reranked"] is True, err
    code, _, err = cli(["es", "search", "grub", "--mode", "vectors", "--index", "forum-text",
                        *common(opensearch, url)])
    assert code != 0 and "holds no vectors" in err and "Traceback" not in err


def test_a_field_their_index_lacks_is_one_line_before_anything_is_made(forum, opensearch, sidecar, cli):
    url, model = sidecar
    code, _, err = cli(["es", "setup", str(model), "--index", "forum-typo", "--from-index", THEIRS,
                        "--title-field", "question.titel", "--no-progress", *common(opensearch, url)])
    assert code != 0 and "--title-field question.titel: index forum has no such field" in err
    assert opensearch.call("HEAD", "/forum-typo")[0] == 404
