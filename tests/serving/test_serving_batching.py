"""The encoder calls of the sidecar (``ModelDirectory.runs``, ``serving.batching.EncoderPool``): which
rows go to one onnxruntime call, that a pool gives what the request's own thread gives, that a lone
request's calls run at once on several workers, that concurrent requests' small calls are merged into
one, and that an error in a call reaches every request that waited on it. Behaviour only: the speed is
measured by ``benchmarks/serving.py``, not here."""

from __future__ import annotations

import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.cli import serve as serve_module
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.batching import EncoderPool
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.serving.settings import Settings

SEMEVAL = (Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "semeval2016-task3"
           / "SemEval2016-Task3-CQA-QL-dev.xml")


@pytest.fixture(scope="module")
def questions():
    """Real SemEval questions (title and HTML body): lengths from a few words to the body cap."""
    spec = read_spec(f"semeval:{SEMEVAL}")
    return [q for rq in spec.queries for q in (rq.query, *rq.candidates)]


def _encoded(model, questions, n, seed=0):
    return model.inputs.encode(random.Random(seed).sample(questions, n))


class _Session:
    """The model's session, with a hook before every run (to hold, fail or watch a call)."""

    def __init__(self, session, before=None) -> None:
        self.session, self.before, self.calls = session, before, []

    def run(self, outputs, feed):
        rows = len(next(iter(feed.values())))
        self.calls.append(rows)
        if self.before is not None:
            self.before(rows)
        return self.session.run(outputs, feed)

    def __getattr__(self, name):
        return getattr(self.session, name)


# -- which rows go to one call ----------------------------------------------------------------------
def test_up_to_batch_size_rows_are_one_call_in_request_order(exported, questions):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=16)
    encoded = _encoded(model, questions, 16)
    assert [run.rows for run in model.runs(encoded)] == [list(range(16))]
    assert model.runs([]) == []


def test_beyond_it_a_dynamic_graph_is_cut_by_length(exported, questions):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=16)
    assert model.config.dynamic_length
    encoded = _encoded(model, questions, 101)
    chunks = [run.rows for run in model.runs(encoded)]
    assert sorted(i for rows in chunks for i in rows) == list(range(101))  # every row once
    assert [len(rows) for rows in chunks] == [16] * 6 + [5]
    length = [sum(len(part) for part in e) for e in encoded]
    flat = [length[i] for rows in chunks for i in rows]
    assert flat == sorted(flat)  # each call holds rows of like length: shortest first
    assert len(set(length)) > 10  # (real questions: the lengths do differ)


def test_a_fixed_length_graph_keeps_request_order(exported, questions):
    model = ModelDirectory.load(exported["gru"], threads=1, batch_size=16)
    assert not model.config.dynamic_length  # every row is padded to the caps: sorting would gain nothing
    runs = model.runs(_encoded(model, questions, 40))
    assert [run.rows for run in runs] == [list(range(16)), list(range(16, 32)), list(range(32, 40))]


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_length_sorted_calls_give_the_same_vectors_as_one_call(model_type, exported, questions):
    one = ModelDirectory.load(exported[model_type], threads=1, batch_size=128)
    cut = ModelDirectory.load(exported[model_type], threads=1, batch_size=8)
    encoded = _encoded(one, questions, 101, seed=3)
    assert np.array_equal(cut.vectors_from_ids(encoded), one.vectors_from_ids(encoded))


# -- the pool -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_a_pool_gives_what_the_request_thread_gives(model_type, exported, questions):
    model = ModelDirectory.load(exported[model_type], threads=1, batch_size=16)
    pool = EncoderPool(model, workers=2)
    try:
        for n in (0, 1, 16, 17, 101):
            encoded = _encoded(model, questions, n, seed=n)
            assert np.array_equal(pool.vectors(encoded), model.vectors_from_ids(encoded)), n
    finally:
        pool.close()


def test_a_lone_requests_calls_run_on_several_workers_at_once(exported, questions):
    """Two calls of one request meet at a barrier: it is passed only if both run at the same time."""
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=16)
    barrier = threading.Barrier(2, timeout=10)
    model.session = _Session(model.session, before=lambda rows: barrier.wait())
    pool = EncoderPool(model, workers=2)
    try:
        encoded = _encoded(model, questions, 32)
        got = pool.vectors(encoded)  # a BrokenBarrierError here: the two calls ran one after the other
    finally:
        pool.close()
    assert model.session.calls == [16, 16]
    model.session = model.session.session
    assert np.array_equal(got, model.vectors_from_ids(encoded))


def test_concurrent_small_requests_are_merged_into_one_call(exported, questions):
    """One worker, held in its first call while eight requests of 3 rows queue: they are then run as
    calls of up to 16 rows, each request getting its own rows' vectors."""
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=16)
    release = threading.Event()
    model.session = _Session(model.session, before=lambda rows: release.wait(10))
    pool = EncoderPool(model, workers=1)
    jobs = [_encoded(model, questions, 3, seed=i) for i in range(9)]
    try:
        with ThreadPoolExecutor(9) as threads:
            first = threads.submit(pool.vectors, jobs[0])
            while not model.session.calls:  # the worker is in its first call
                threading.Event().wait(0.01)
            rest = [threads.submit(pool.vectors, job) for job in jobs[1:]]
            while len(pool._queue) < 8:  # every request has queued its rows
                threading.Event().wait(0.01)
            release.set()
            got = [first.result(10)] + [f.result(10) for f in rest]
    finally:
        pool.close()
    assert model.session.calls == [3, 15, 9]  # 5 requests in one call (15 rows ≤ 16), then 3
    assert (pool.calls, pool.rows, pool.merged) == (3, 27, 2)
    model.session = model.session.session
    for job, vectors in zip(jobs, got, strict=True):
        assert np.array_equal(vectors, model.vectors_from_ids(job))


def test_an_error_in_a_call_reaches_every_request_it_held_and_the_pool_goes_on(exported, questions):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=16)
    failing = threading.Event()
    failing.set()

    def fail(rows):
        if failing.is_set():
            raise RuntimeError("onnxruntime failed")

    model.session = _Session(model.session, before=fail)
    pool = EncoderPool(model, workers=2)
    try:
        with ThreadPoolExecutor(4) as threads:
            futures = [threads.submit(pool.vectors, _encoded(model, questions, n, seed=n))
                       for n in (3, 20, 40, 5)]
            for future in futures:
                with pytest.raises(RuntimeError, match="onnxruntime failed"):
                    future.result(10)
        failing.clear()
        encoded = _encoded(model, questions, 20)
        assert pool.vectors(encoded).shape == (20, model.dimension)
    finally:
        pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.vectors(encoded)


@pytest.mark.parametrize(("argv", "workers"), [([], "cores"), (["--encoder-workers", "3"], 3),
                                               (["--encoder-workers", "0"], None)])
def test_serve_hands_its_encoder_calls_to_a_pool_unless_told_0(argv, workers, exported, cli, monkeypatch):
    seen = []
    monkeypatch.setattr(serve_module, "run_sidecar", seen.append)
    monkeypatch.delenv("ESRERANK_TOKEN", raising=False)
    code, _, err = cli(["serve", str(exported["bow-cnn"]), *argv])
    assert code == 0, err
    expected = serve_module.available_cores() if workers == "cores" else workers
    assert seen[0].encoder_workers == expected and seen[0].batch_size == 16


def test_a_pool_needs_a_worker(exported):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1)
    with pytest.raises(ValueError):
        EncoderPool(model, workers=0)
    with pytest.raises(UserError, match="--encoder-workers"):
        Settings(model_dir=exported["bow-cnn"], encoder_workers=0)


# -- the sidecar with a pool ----------------------------------------------------------------------------
@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_answers_with_a_pool_under_concurrency_equal_answers_alone_without(model_type, exported, questions):
    """16 threads on one app whose encoder calls go to a pool of 2 (cache small enough to evict) against a
    fresh app that encodes in the request thread, no cache: the same JSON, request for request."""
    rng = random.Random(9)
    bodies = []
    for i in range(120):
        docs = rng.sample(questions, rng.randint(1, 60))
        body = {"query": {"title": docs[0].title, "body": docs[0].body},
                "documents": [{"title": d.title, "body": d.body} for d in docs[1:] or docs]}
        bodies.append(body if i % 4 else {"texts": [d.title for d in docs]})
    paths = ["/v1/encode" if "texts" in b else "/v1/rerank" for b in bodies]
    pooled = create_app(Settings(model_dir=exported[model_type], onnx_threads=1, batch_size=16,
                                 encoder_workers=2, cache_size=200))
    client = pooled.test_client()
    with ThreadPoolExecutor(16) as threads:
        together = list(threads.map(lambda i: client.post(paths[i], json=bodies[i]).get_data(as_text=True),
                                    range(len(bodies))))
    alone = create_app(ModelDirectory.load(exported[model_type], threads=1, batch_size=16), cache_size=0)
    alone_client = alone.test_client()
    for i, body in enumerate(bodies):
        assert json.loads(together[i]) == alone_client.post(paths[i], json=body).json, i
    service = pooled.extensions["esrerank"]
    assert service.encoder is not None and service.encoder.calls > 0
    assert alone.extensions["esrerank"].encoder is None
    metrics = client.get("/metrics").get_data(as_text=True)
    assert f"esrerank_encoder_calls_total {float(service.encoder.calls)}" in metrics
    assert f"esrerank_encoder_rows_total {float(service.encoder.rows)}" in metrics
    assert "esrerank_encoder_merged_calls_total" in metrics and "esrerank_encoder_workers 2.0" in metrics
    assert "esrerank_encoder_" not in alone_client.get("/metrics").get_data(as_text=True)
    service.encoder.close()
