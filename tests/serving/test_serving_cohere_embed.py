"""Cohere's embed on a live ``esrerank serve``: ``/v1/embed`` and ``/v2/embed`` in Cohere's shapes, read
by the released clients (``cohere.Client`` and ``ClientV2``, LangChain's ``CohereEmbeddings``, LlamaIndex's
``CohereEmbedding``), and the product's own ``/v1/encode`` beside them. No mock on either side.

Real AskUbuntu titles (the shipped sample, shell and ``$PATH`` included). Every answer must carry, for each
text, exactly the vector ``/v1/encode`` gives the same text: the JSON floats are written from the same
float32 values (``Service.encode``) and read back as Python floats, so the comparison is ``==``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from client_libraries import needs
from live_sidecar import post, serve

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TOKEN = "cohere-embed-token"


@pytest.fixture(scope="module")
def titles() -> list[str]:
    """30 real titles, those with shell in them ($PATH, quotes, slashes) first."""
    lines = TITLES.read_text(encoding="utf-8").splitlines()
    found = sorted({t.strip() for line in lines for t in line.split("\t")[1:] if t.strip()})
    shell = [t for t in found if any(c in t for c in "$/`'\"|")]
    return (shell + [t for t in found if t not in shell])[:30]


@pytest.fixture(scope="module")
def long_text(titles) -> str:
    """Real titles joined into one plain text (no HTML: all of it is a title) far past the model's 48-token
    title cap."""
    return " ".join(titles[:25])


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    with serve(exported["bow-cnn"], TOKEN, tmp_path_factory.mktemp("token")) as url:
        yield url


def _post(url: str, path: str, body: dict) -> tuple[int, dict]:
    return post(url + path, body, TOKEN)


def _encode(url: str, texts: list[str]) -> list[list[float]]:
    """The product's own answer: each text's vector from /v1/encode."""
    status, answer = _post(url, "/v1/encode", {"texts": texts})
    assert status == 200, answer
    assert set(answer["embeddings"][0]) >= {"vector", "terms", "bow_tokens", "bow_weights"}
    return [e["vector"] for e in answer["embeddings"]]


def test_v1_answers_cohere_floats_equal_to_encode(sidecar, titles):
    """The body OpenSearch's Cohere embed blueprint sends (model, input_type, truncate: END) → Cohere's
    ``embeddings_floats`` answer, each vector /v1/encode's."""
    body = {"texts": titles, "truncate": "END", "model": "embed-english-v3.0",
            "input_type": "search_document"}
    status, answer = _post(sidecar, "/v1/embed", body)
    assert status == 200, answer
    assert set(answer) == {"id", "response_type", "embeddings", "texts", "meta"}
    assert answer["response_type"] == "embeddings_floats" and answer["texts"] == titles
    assert answer["meta"]["api_version"] == {"version": "1"}
    assert answer["meta"]["billed_units"]["input_tokens"] > len(titles)
    assert answer["embeddings"] == _encode(sidecar, titles)
    assert _post(sidecar, "/v1/embed", body)[1]["id"] != answer["id"]


def test_input_type_changes_nothing_and_embedding_types_gives_by_type(sidecar, titles):
    expected = _encode(sidecar, titles[:5])
    for input_type in ("search_query", "search_document", "classification", "clustering", None):
        status, answer = _post(sidecar, "/v1/embed", {"texts": titles[:5], "input_type": input_type,
                                                      "embedding_types": ["float"], "truncate": None})
        assert status == 200, answer
        assert answer["response_type"] == "embeddings_by_type"
        assert answer["embeddings"] == {"float": expected}


def test_v2_texts_and_inputs(sidecar, titles):
    expected = _encode(sidecar, titles[:4])
    body = {"texts": titles[:4], "model": "embed-v4.0", "input_type": "search_query",
            "embedding_types": ["float"]}
    status, by_texts = _post(sidecar, "/v2/embed", body)
    assert status == 200, by_texts
    assert by_texts["response_type"] == "embeddings_by_type" and by_texts["embeddings"] == {"float": expected}
    assert by_texts["meta"]["api_version"] == {"version": "2"}
    inputs = [{"content": [{"type": "text", "text": t}]} for t in titles[:4]]
    status, by_inputs = _post(sidecar, "/v2/embed", {"inputs": inputs, "output_dimension": 24})
    assert status == 200, by_inputs
    assert by_inputs["embeddings"] == {"float": expected} and by_inputs["texts"] == titles[:4]


@pytest.mark.parametrize(("path", "body", "field", "words"), [
    ("/v1/embed", {"texts": ["grub"], "embedding_types": ["int8"]}, "embedding_types.0", "only float"),
    ("/v2/embed", {"texts": ["grub"], "embedding_types": ["float", "ubinary"]}, "embedding_types.1",
     "only float"),
    ("/v1/embed", {"texts": ["grub"], "input_type": "image"}, "input_type", "search_document"),
    ("/v1/embed", {"texts": ["grub"], "truncate": "MIDDLE"}, "truncate", "'NONE', 'START' or 'END'"),
    ("/v1/embed", {"texts": ["grub"], "images": ["data:image/png;base64,AA=="]}, "images", "text only"),
    ("/v2/embed", {"texts": ["grub"], "output_dimension": 1024}, "output_dimension", "24 dimensions"),
    ("/v2/embed", {"texts": ["grub"], "max_tokens": 10}, "max_tokens", "truncate"),
    ("/v2/embed", {"model": "embed-v4.0"}, "(body)", "texts or inputs"),
    ("/v2/embed", {"inputs": [{"content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
     "inputs.0.content.0.type", "'text'"),
    ("/v1/embed", {"texts": ["grub", "  "]}, "texts.1", "must not be empty"),
    ("/v1/embed", {"texts": ["grub"], "dimensions": 24}, "dimensions", "Extra inputs"),
])
def test_refusals_name_the_field(sidecar, path, body, field, words):
    status, answer = _post(sidecar, path, body)
    assert status == 400 and answer["field"] == field and words in answer["error"], answer


def test_truncate_none_end_start(sidecar, long_text, titles):
    """END is /v1/encode's cut; NONE refuses the over-long text by position; START keeps the end: its
    vector is the one of the longest run of final words that NONE accepts."""
    short = titles[0]
    status, answer = _post(sidecar, "/v1/embed", {"texts": [short, long_text], "truncate": "NONE"})
    assert status == 400 and answer["field"] == "texts.1", answer
    assert "truncate=NONE" in answer["error"] and "48" in answer["error"]
    assert _post(sidecar, "/v1/embed", {"texts": [short], "truncate": "NONE"})[0] == 200

    end = _post(sidecar, "/v1/embed", {"texts": [long_text], "truncate": "END"})[1]["embeddings"][0]
    default = _post(sidecar, "/v1/embed", {"texts": [long_text]})[1]["embeddings"][0]
    assert end == default == _encode(sidecar, [long_text])[0]

    start = _post(sidecar, "/v1/embed", {"texts": [long_text], "truncate": "START"})[1]["embeddings"][0]
    assert start != end
    words = long_text.split()
    suffixes = [" ".join(words[k:]) for k in range(1, len(words))]
    matching = [k + 1 for k, vector in enumerate(_encode(sidecar, suffixes)) if vector == start]
    assert matching, "START's vector is no suffix's"
    dropped = matching[0]
    kept, longer = " ".join(words[dropped:]), " ".join(words[dropped - 1:])
    assert _post(sidecar, "/v1/embed", {"texts": [kept], "truncate": "NONE"})[0] == 200
    assert _post(sidecar, "/v1/embed", {"texts": [longer], "truncate": "NONE"})[0] == 400


@needs("cohere", "cohere")
def test_cohere_client_v1_and_v2(sidecar, titles):
    import cohere

    expected = _encode(sidecar, titles)
    v1 = cohere.Client(api_key=TOKEN, base_url=sidecar, timeout=30)
    floats = v1.embed(texts=titles, model="embed-english-v3.0", input_type="search_document", truncate="END")
    assert floats.response_type == "embeddings_floats" and floats.embeddings == expected
    by_type = v1.embed(texts=titles, model="embed-english-v3.0", input_type="search_query",
                       embedding_types=["float"])
    assert by_type.response_type == "embeddings_by_type" and by_type.embeddings.float_ == expected
    v2 = cohere.ClientV2(api_key=TOKEN, base_url=sidecar, timeout=30)
    answer = v2.embed(texts=titles, model="embed-v4.0", input_type="search_document",
                      embedding_types=["float"])
    assert answer.embeddings.float_ == expected and answer.texts == titles
    with pytest.raises(cohere.core.ApiError) as refused:
        v2.embed(texts=titles, model="embed-v4.0", input_type="search_document", embedding_types=["int8"])
    assert refused.value.status_code == 400


@needs("langchain_cohere", "langchain-cohere")
def test_langchain_cohere_embeddings(sidecar, titles):
    from langchain_cohere import CohereEmbeddings

    expected = _encode(sidecar, titles)
    embeddings = CohereEmbeddings(model="embed-english-v3.0", cohere_api_key=TOKEN, base_url=sidecar)
    assert embeddings.embed_documents(titles) == expected
    assert embeddings.embed_query(titles[3]) == expected[3]


@needs("llama_index.embeddings.cohere", "llama-index-embeddings-cohere")
def test_llama_index_cohere_embedding(sidecar, titles):
    from llama_index.embeddings.cohere import CohereEmbedding

    expected = _encode(sidecar, titles)
    embedding = CohereEmbedding(api_key=TOKEN, model_name="embed-english-v3.0", base_url=sidecar,
                                input_type="search_document")
    assert embedding.get_text_embedding_batch(titles) == expected
    assert embedding.get_query_embedding(titles[2]) == expected[2]


def test_an_inputs_item_is_held_to_one_texts_cap_joined(sidecar):
    """Each part under the cap but their join over it (3 × 40,000 characters) is one text of 120,002
    characters: a 400 naming the item, answered before anything is embedded; 101 parts: a 400 too."""
    import time

    parts = [{"type": "text", "text": "grub " * 8_000} for _ in range(3)]
    start = time.perf_counter()
    status, answer = _post(sidecar, "/v2/embed", {"inputs": [{"content": parts}]})
    assert status == 400 and answer["field"] == "inputs.0" and "120002 characters" in answer["error"], answer
    assert time.perf_counter() - start < 5
    many = [{"type": "text", "text": "grub"}] * 101
    status, answer = _post(sidecar, "/v2/embed", {"inputs": [{"content": many}]})
    assert status == 400 and answer["field"] == "inputs.0.content", answer
    one = [{"type": "text", "text": "grub " * 8_000}, {"type": "text", "text": "boot"}]
    assert _post(sidecar, "/v2/embed", {"inputs": [{"content": one}]})[0] == 200
