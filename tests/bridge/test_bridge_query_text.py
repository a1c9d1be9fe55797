"""The library's entry points take any query the CLI takes, and say what the CLI says of the others
(issue 48, finding 9).

A lone surrogate (``"\\ud800"``, what ``json.loads`` makes of a web form's ``"\\ud800"``) raised
``UnicodeEncodeError`` from deep in the client; ``BridgeSearch.search`` now raises the CLI's one-line
UserError (``text.sidecar_text.query_refusal``). A query over the sidecar's 100,000 characters searches:
the first stage reads it whole, the sidecar gets its start (``model_part``), which the model reads the
same as the whole text: checked on the served model's own token ids, for a 200,000-character pasted log
and every AskUbuntu question of the samples. Real sidecar (waitress), real AskUbuntu titles.
"""

from __future__ import annotations

import threading

import pytest
from pasted_log import VAL, pasted_log
from waitress.server import create_server

from es_plugin_bridge.bridge import BridgeSearch, SidecarClient
from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.text.sidecar_text import MAX_TEXT_CHARS, model_part

TITLES = VAL.parent / "train_titles.tsv"


@pytest.fixture(scope="module", params=["bow-cnn", "gru"])
def model(exported, request):
    return ModelDirectory.load(exported[request.param], threads=1)


@pytest.fixture(scope="module")
def bridge(exported):
    server = create_server(create_app(ModelDirectory.load(exported["bow-cnn"], threads=1)), host="127.0.0.1",
                           port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    collection = list(read_spec(f"pairs:{TITLES}").questions.values())[:2000]
    yield BridgeSearch(collection, SidecarClient(f"http://127.0.0.1:{server.effective_port}", timeout=30))
    server.close()
    thread.join(timeout=5)


@pytest.mark.parametrize("query", ["\ud800 grub", "grub \udfff", Question("q", "grub", "<p>boot \ud83d</p>")])
def test_a_lone_surrogate_is_the_clis_one_line_error(bridge, query):
    with pytest.raises(UserError, match=r"lone surrogate U\+D[89A-F][0-9A-F]{2} at character \d+"):
        bridge.search(query)
    found = [("", 1.0)]
    with pytest.raises(UserError, match="lone surrogate"):
        bridge.rerank(question_from_text(query) if isinstance(query, str) else query, found, 10)


def test_an_invalid_utf8_byte_and_a_blank_query_say_what_the_cli_says(bridge):
    with pytest.raises(UserError, match=r"^the query is not valid UTF-8: byte 0x80 at character 6$"):
        bridge.search("grub \udc80")
    with pytest.raises(UserError, match="^the query is empty$"):
        bridge.search(" \t")


def test_a_query_over_the_sidecars_cap_is_reranked(bridge):
    log = pasted_log(2 * MAX_TEXT_CHARS)
    assert len(log) > MAX_TEXT_CHARS
    result = bridge.search(log, k=10)
    assert result.reranked, result.fallback_reason
    assert len(result.hits) == 10 and all(0.0 <= h.score <= 1.0 for h in result.hits)


def test_the_cut_leaves_what_the_model_reads_unchanged(model):
    log = question_from_text(pasted_log(2 * MAX_TEXT_CHARS))
    assert len(log.title) + len(log.body) > MAX_TEXT_CHARS
    assert model_part(log) != log
    assert model.token_ids(model_part(log)) == model.token_ids(log)
    questions = list(read_spec(f"pairs:{VAL}").questions.values())
    long = [q for q in questions if len(q.body) > 2_000]
    assert long  # the samples' longest bodies: the cut must not change what the model reads of them
    for question in questions:
        assert model.token_ids(model_part(question)) == model.token_ids(question), question.id
