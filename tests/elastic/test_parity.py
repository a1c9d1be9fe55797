"""Engine parity without an engine: a mode's per-query lists against its in-process ranker's for the same
searches (``elastic/parity.py``), and the requests a block sends counted by target
(``elastic/request_count.py``). The node tests run it on every mode (tests/opensearch/
test_opensearch_review_page.py)."""

from __future__ import annotations

import http.client
import http.server
import threading
import urllib.request

import pytest

from es_plugin_bridge.data.types import Question, RankingQuery
from es_plugin_bridge.elastic.parity import Asked, badge, parity
from es_plugin_bridge.elastic.request_count import by_target, counting
from es_plugin_bridge.rankers import RankerContext, TokenCache, build
from es_plugin_bridge.text import Preprocessor

TITLES = ["install nvidia driver", "nvidia driver black screen", "wifi drops after suspend",
          "suspend breaks wifi", "install python3 pip", "pip install fails python3"]


@pytest.fixture
def bm25():
    collection = [Question(f"d{i}", t, "") for i, t in enumerate(TITLES)]
    context = RankerContext(collection=collection, tokens=TokenCache(Preprocessor()))
    return build("bm25", context), collection


def _search_records(ranker, asked):
    return [{"query_id": f"q{i}", "top_ids": [d for d, _ in ranker.search(a.query, a.k, exclude=a.exclude)]}
            for i, a in enumerate(asked)]


def test_the_same_lists_hold_parity_on_every_query(bm25):
    ranker, collection = bm25
    asked = [Asked(Question(f"x{i}", t, ""), 3, {f"d{i}"}) for i, t in enumerate(TITLES[:4])]
    result = parity("bridge", "fused", _search_records(ranker, asked), asked, ranker)
    assert (result["equal"], result["queries"], result["differ"]) == (4, 4, [])
    assert result["badge"] == "parity 4/4 queries"


def test_a_list_in_another_order_is_named_with_both_lists(bm25):
    ranker, _ = bm25
    asked = [Asked(Question(f"x{i}", t, ""), 3) for i, t in enumerate(TITLES)]
    records = _search_records(ranker, asked)
    swapped = records[2]["top_ids"]
    records[2]["top_ids"] = [swapped[1], swapped[0], *swapped[2:]]  # the same ids, not the same order
    result = parity("hybrid", "hybrid", records, asked, ranker)
    assert result["equal"] == 5 and result["differ"] == ["q2"]
    scores = dict(ranker.search(asked[2].query, 3))
    gap = scores[swapped[0]] - scores[swapped[1]]
    assert result["examples"] == [{"query_id": "q2", "engine": records[2]["top_ids"], "in_process": swapped,
                                   "swap_gap": pytest.approx(gap)}]
    assert result["max_swap_gap"] == pytest.approx(gap) and gap > 0
    assert result["badge"] == ("parity 5/6 queries; differs on q2 "
                               f"(swapped scores at most {gap:.1e} apart in process)")
    records[3]["top_ids"] = ["not-in-process", *records[3]["top_ids"][1:]]  # another document: no gap
    other = parity("hybrid", "hybrid", records, asked, ranker)
    assert other["differ"] == ["q2", "q3"] and other["max_swap_gap"] is None
    assert other["badge"] == "parity 4/6 queries; differs on q2, q3"
    tie = {**result, "max_swap_gap": 0.0}  # the engine broke a tie the other way: said so
    assert badge(tie) == ("parity 5/6 queries; differs on q2 "
                          "(only documents tied in process, put in another order)")
    many = {**other, "equal": 1, "differ": ["a", "b", "c", "d", "e"]}
    assert badge(many) == "parity 1/6 queries; differs on a, b, c and 2 more"


def test_a_rerank_is_compared_on_every_candidate_in_the_evaluators_order(bm25):
    ranker, collection = bm25
    query = RankingQuery(Question("q", "nvidia driver install", ""), collection, [1, 1, 0, 0, 0, 0])
    scores = ranker.rerank(query)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    records = [{"query_id": "q", "ranking": [collection[i].id for i in order]}]
    assert parity("rerank", "model", records, [Asked(query)], ranker)["equal"] == 1
    records[0]["ranking"] = records[0]["ranking"][::-1]
    assert parity("rerank", "model", records, [Asked(query)], ranker)["differ"] == ["q"]


def test_searches_that_do_not_match_the_queries_are_not_compared(bm25):
    ranker, _ = bm25
    result = parity("vectors", "fused", [{"query_id": "q", "top_ids": []}], [], ranker)
    assert result["equal"] is None and result["badge"] == "parity not checked: 0 searches for 1 queries: " \
                                                           "not compared"


class _Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_requests_are_counted_by_target_whatever_client_sends_them():
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    engine, sidecar = (f"http://127.0.0.1:{s.server_address[1]}" for s in servers)
    try:
        with counting() as sent:
            for _ in range(3):
                urllib.request.urlopen(f"{engine}/", timeout=10).read()
            conn = http.client.HTTPConnection("127.0.0.1", servers[1].server_address[1], timeout=10)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
        assert by_target(sent, [engine], sidecar) == {"engine": 3, "sidecar": 1}
        urllib.request.urlopen(f"{engine}/", timeout=10).read()  # after the block: not counted
        assert sum(sent.values()) == 4
        assert http.client.HTTPConnection.putrequest.__name__ == "putrequest"  # the original is back
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
