"""OpenSearch embeds at ingest (``es setup --embed-at-ingest``) on a real OpenSearch 2.19.1 node, with a
live sidecar, through the CLI.

``es setup`` registers two ml-commons remote models on the sidecar's ``/v1/encode`` (one answers each
text's vector, one its BOW terms) and the index's ``default_pipeline``: neural-search's
``text_embedding`` (→ ``vector``) and ``sparse_encoding`` (→ ``bow``) processors between two Painless
scripts (``rerank_text``; a zero vector dropped). ``es index`` then sends the text only. On 1,200 lines
of real AskUbuntu title pairs (2,197 questions, 110 titles with shell or code in them: ``$PATH``,
``:a;$!N;``, backquotes, ``||``, quotes, braces, backslashes), what OpenSearch stores is what the
sidecar's ``/v1/encode`` answers for the same text, and modes ``vectors``, ``hybrid`` and ``hybrid-rrf``
give the top 10 of the same data embedded by the client (``tests/opensearch/test_opensearch_vectors.py``
holds that one equal to the in-process rankers).

**Tolerance of the vectors: 1e-6 per component, and the BOW weights equal as float32.** OpenSearch
carries each number as a float32 (ml-commons' ``EmbeddingPostProcessFunction`` makes FLOAT32 tensors;
neural-search's ``MLCommonsClientAccessor`` reads ``List<Float>``, ``TokenWeightUtil`` ``floatValue()``)
and the sidecar's JSON numbers are float32 values written as doubles, so nothing is lost in the
transport: each component is the sidecar's, rounded to float32. What can differ is the encoder itself:
neural-search sorts a batch's texts by length and batches them 200 at a time, this check asks in other
batches, and an fp32 graph's output moves with its batch by float noise (≲ 1e-7 on these unit
vectors); 1e-6 is the bound the client-side test uses for the same reason. The BOW weights are
computed in float64 outside the graph, so they are equal after the one rounding to float32 (what
Lucene indexes either way).

Sources relied on (tags ml-commons 2.19.1.0, neural-search 2.19.1.0, OpenSearch 2.19.1):
ml-commons ``MLPreProcessFunction`` / ``OpenAIEmbeddingPreProcessFunction``
(``connector.pre_process.default.embedding`` → ``parameters.input``), ``MLPostProcessFunction`` /
``EmbeddingPostProcessFunction`` and ``ConnectorUtils.processOutput`` (``response_filter``),
``ScriptUtils.executePostProcessFunction`` and ``AbstractConnector.parseResponse`` (a Painless answer
parsed as a ``ModelTensor``), ``RemoteConnectorExecutor`` (one call per batch),
``MLSdkAsyncHttpResponseHandler`` (the failure reasons); neural-search ``TextEmbeddingProcessor``,
``SparseEncodingProcessor``, ``InferenceProcessor`` (batches, the field map),
``util/TokenWeightUtil.java``; OpenSearch ``ingest/AbstractBatchingProcessor.java`` (``batch_size``).
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from es_commands import TITLES, assert_stored_as_embedded, common, embeddings, run, sources

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.modes.rerank import trusted_url_regex
from es_plugin_bridge.elastic.opensearch_ingest import embed_url_regex
from es_plugin_bridge.evaluation.retrieval import duplicate_queries
from es_plugin_bridge.local_http import free_port

pytestmark = [pytest.mark.engine, pytest.mark.slow]

WINDOW = 50
MODES = ("learned-hybrid", "vectors", "hybrid", "hybrid-rrf")
MESSY = ("$", "`", "|", '"', "{", "\\", "->")
#: An address where nothing listens: ``es index`` on an ingest index must not need the sidecar.
NO_SIDECAR = "http://127.0.0.1:9"


@dataclass
class Indexed:
    """The same questions, embedded at ingest (``ingest``) and by the client (``client``)."""

    ingest: str
    client: str
    questions: list[Question]
    queries: list[str]
    index_out: str


def titles_spec(tmp_path: Path, lines: slice) -> str:
    path = tmp_path / "titles.tsv"
    path.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[lines]),
                    encoding="utf-8")
    return f"pairs:{path}"


def queries_of(spec: str) -> list[str]:
    """20 duplicate queries, then titles with shell or code in them: 80 in all."""
    dataset = read_spec(spec)
    found, _ = duplicate_queries(dataset.pairs)
    queries = [q.query.title for q in found[:20]]
    messy = [q.title for q in dataset.questions.values() if any(c in q.title for c in MESSY)]
    return (queries + [t for t in messy if t not in queries])[:80]


@pytest.fixture(scope="module")
def indexed(opensearch, sidecar, tmp_path_factory) -> Indexed:
    """AskUbuntu titles set up and indexed twice through the CLI: embedded at ingest (with no sidecar
    the client could reach) and by the client."""
    url, model = sidecar
    spec = titles_spec(tmp_path_factory.mktemp("titles"), slice(3000, 4200))
    assert run(["es", "setup", str(model), "--index", "ingest-askubuntu", "--embed-at-ingest",
                *common(opensearch, url)]) == 0
    argv = ["es", "index", spec, "--index", "ingest-askubuntu", "--no-progress", "--es-url", opensearch.url,
            "--sidecar", NO_SIDECAR, "--token", "not-the-token"]
    out_path = tmp_path_factory.mktemp("out") / "index.out"
    with _captured(out_path):
        code = run(argv)
    assert code == 0, out_path.read_text()
    assert run(["es", "setup", str(model), "--index", "client-askubuntu", *common(opensearch, url)]) == 0
    assert run(["es", "index", spec, "--index", "client-askubuntu", "--no-progress",
                *common(opensearch, url)]) == 0
    return Indexed("ingest-askubuntu", "client-askubuntu", list(read_spec(spec).questions.values()),
                   queries_of(spec), out_path.read_text())


@contextmanager
def _captured(path: Path) -> Iterator[None]:
    """stdout and stderr of an in-process command into ``path`` (a module fixture has no capsys)."""
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        yield
    path.write_text(buffer.getvalue(), encoding="utf-8")


def test_setup_registers_two_embedding_models_and_the_default_pipeline(indexed, opensearch, sidecar):
    url, _ = sidecar
    settings = opensearch.ok("GET", f"/{indexed.ingest}/_settings")[indexed.ingest]["settings"]["index"]
    mapping = opensearch.ok("GET", f"/{indexed.ingest}/_mapping")[indexed.ingest]["mappings"]
    embedding = mapping["_meta"]["esrerank"]["embedding"]
    assert settings["default_pipeline"] == embedding["pipeline"] == f"{indexed.ingest}-embed"
    pipeline = opensearch.ok("GET", f"/_ingest/pipeline/{embedding['pipeline']}")[embedding["pipeline"]]
    kinds = [next(iter(p)) for p in pipeline["processors"]]
    assert kinds == ["script", "text_embedding", "sparse_encoding", "script"]
    assert not any(next(iter(p.values())).get("ignore_failure") for p in pipeline["processors"])
    for output in ("vector", "bow"):
        model = opensearch.ok("GET", f"/_plugins/_ml/models/{embedding[f'{output}_model']}")
        assert model["model_state"] == "DEPLOYED"
        connector = opensearch.ok("GET", f"/_plugins/_ml/connectors/{embedding[f'{output}_connector']}")
        assert connector["actions"][0]["url"] == f"{url}/v1/encode"
    trusted = opensearch.ok("GET", "/_cluster/settings?flat_settings=true")["persistent"][
        "plugins.ml_commons.trusted_connector_endpoints_regex"]
    assert embed_url_regex(url) in trusted and trusted_url_regex(url) in trusted
    plain = opensearch.ok("GET", f"/{indexed.client}/_settings")[indexed.client]["settings"]["index"]
    assert "default_pipeline" not in plain  # without the flag the client embeds, as before


def test_index_sends_the_text_only_and_opensearch_stores_the_sidecars_vectors(indexed, opensearch, sidecar):
    """Every one of the 2,197 questions (indexed with no sidecar reachable from the client) holds the
    vector and BOW terms the sidecar's ``/v1/encode`` answers for its text, as the client-embedded
    index does."""
    url, _ = sidecar
    assert "the cluster embeds through pipeline ingest-askubuntu-embed" in indexed.index_out
    n = len(indexed.questions)
    assert f"read {n}  indexed {n}  skipped 0  failed 0" in indexed.index_out
    stored = sources(opensearch, indexed.ingest)
    client = sources(opensearch, indexed.client)
    assert set(stored) == set(client) == {q.id for q in indexed.questions}
    wanted = embeddings(url, indexed.questions)
    for question in indexed.questions:
        assert_stored_as_embedded(stored[question.id], wanted[question.id], question)
        assert_stored_as_embedded(client[question.id], wanted[question.id], question)
        same = {k: v for k, v in client[question.id].items() if k not in ("vector", "bow")}
        assert {k: v for k, v in stored[question.id].items() if k not in ("vector", "bow")} == same


def search(cli, opensearch, url: str, index: str, text: str, mode: str) -> list[tuple[str, float]]:
    code, out, err = cli(["es", "search", "--mode", mode, "--json", "--window", str(WINDOW), "--index", index,
                          *common(opensearch, url), "--", text])
    assert code == 0, (text, err)
    result = json.loads(out)
    assert result["reranked"] is True
    return [(hit["id"], hit["score"]) for hit in result["hits"]]


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_gives_the_client_embedded_indexs_top_10(indexed, opensearch, sidecar, cli, mode):
    """The same ids in the same order, and the same scores: both indexes hold the same float32
    vectors and BOW weights (above), so every score is computed from equal numbers."""
    url, _ = sidecar
    differ = {}
    for text in indexed.queries:
        got = search(cli, opensearch, url, indexed.ingest, text, mode)
        want = search(cli, opensearch, url, indexed.client, text, mode)
        assert got, text
        if [d for d, _ in got] != [d for d, _ in want] or \
                max(abs(a - b) for (_, a), (_, b) in zip(got, want, strict=True)) > 1e-6:
            differ[text] = (got, want)
    assert differ == {}, f"{len(differ)} of {len(indexed.queries)} queries differ"


class SidecarFront:
    """What OpenSearch calls instead of the sidecar: it forwards to the sidecar until :meth:`stop_after`
    requests have passed, then stops listening, as a sidecar that is stopped does (connections are
    refused). HTTP/1.0, so no connection outlives its request."""

    def __init__(self, target: str, port: int | None = None) -> None:
        self.target = target
        self.port = port or free_port()
        self.remaining: int | None = None
        self._server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SidecarFront:
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                keep = ("authorization", "content-type")
                headers = {k: v for k, v in self.headers.items() if k.lower() in keep}
                request = urllib.request.Request(front.target + self.path, data=body, method="POST",
                                                 headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=60) as resp:
                        status, answer = resp.status, resp.read()
                except urllib.error.HTTPError as exc:
                    status, answer = exc.code, exc.read()
                if front.remaining is not None:
                    front.remaining -= 1
                    if front.remaining == 0:  # stop listening before this answer leaves: no later call
                        front.stop()          # can reach the sidecar
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                self.wfile.flush()

            def log_message(self, *args) -> None:
                return None

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop_after(self, requests: int) -> None:
        self.remaining = requests

    def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            server.shutdown()
            server.server_close()


def test_the_sidecar_stopped_during_es_index_fails_in_one_line_and_stores_nothing_without_its_vector(
        opensearch, sidecar, cli, tmp_path):
    """OpenSearch's sidecar stops after the first batch of 50 (two ``/v1/encode`` calls: vector and
    BOW). The second bulk's items fail with ml-commons' "Error communicating with remote model" (status
    500, which ``es index`` would otherwise resend with back-off for half a minute per batch): the run
    stops at once, exits 1, and its last line is one error naming the sidecar's URL. The index holds
    the first batch only, each with its vector and terms; no processor ignores a failure, so no
    document got in without them. Back up, ``--resume`` indexes the rest."""
    url, model = sidecar
    spec = titles_spec(tmp_path, slice(0, 200))
    questions = list(read_spec(spec).questions.values())
    assert len(questions) > 100
    front = SidecarFront(url).start()
    try:
        code, _, err = cli(["es", "setup", str(model), "--index", "ingest-stopped", "--embed-at-ingest",
                            "--sidecar-from-es", front.url, *common(opensearch, url)])
        assert code == 0, err
        front.stop_after(2)
        argv = ["es", "index", spec, "--index", "ingest-stopped", "--no-progress", "--batch-size", "50",
                *common(opensearch, url)]
        code, out, err = cli(argv)
        assert code == 1
        assert "Traceback" not in err
        last = err.strip().splitlines()[-1]
        assert last.startswith("error: OpenSearch's ingest pipeline ingest-stopped-embed could not embed "
                               f"through the sidecar at {front.url}/v1/encode (")
        assert "Error communicating with remote model" in last and "re-run with --resume" in last
        assert "read 100  indexed 50  skipped 0  failed 50" in out
        stored = sources(opensearch, "ingest-stopped")
        assert len(stored) == 50
        wanted = embeddings(url, questions)
        by_id = {q.id: q for q in questions}
        for doc_id, source in stored.items():
            assert_stored_as_embedded(source, wanted[doc_id], by_id[doc_id])
        front = SidecarFront(url, front.port).start()  # the sidecar is back, at the same address
        code, out, err = cli(argv + ["--resume"])
        assert code == 0, err
        assert f"read {len(questions)}  indexed {len(questions) - 50}  skipped 50  failed 0" in out
        stored = sources(opensearch, "ingest-stopped")
        assert len(stored) == len(questions)
        for question in questions:
            assert_stored_as_embedded(stored[question.id], wanted[question.id], question)
    finally:
        front.stop()


def test_setup_fails_in_one_line_when_opensearch_cannot_reach_the_sidecar(opensearch, sidecar, cli):
    """``es setup`` tries the pipeline on one question (``_simulate``) before it makes the index."""
    url, model = sidecar
    dead = f"http://127.0.0.1:{free_port()}"
    code, _, err = cli(["es", "setup", str(model), "--index", "ingest-unreachable", "--embed-at-ingest",
                        "--sidecar-from-es", dead, *common(opensearch, url)])
    assert code != 0
    assert err.strip().startswith(
        f"error: OpenSearch could not embed through the sidecar at {dead}/v1/encode")
    assert len(err.strip().splitlines()) == 1
    assert opensearch.call("GET", "/ingest-unreachable")[0] == 404


def test_embed_at_ingest_refuses_an_index_without_vectors(opensearch, sidecar, cli):
    url, model = sidecar
    code, _, err = cli(["es", "setup", str(model), "--index", "ingest-none", "--embed-at-ingest",
                        "--no-vectors", *common(opensearch, url)])
    assert code != 0 and err.strip() == ("error: --embed-at-ingest: an index made with --no-vectors holds "
                                         "nothing to embed")
