"""Configure OpenSearch (>= 2.15) to rerank through the esrerank sidecar, from the JSON files beside
this script — the same steps the README gives as curl commands:

  1. cluster-settings.json  PUT  _cluster/settings            (trust the sidecar's URL, beside the URLs
                                                               the cluster trusts already; allow a private IP)
  2. connector.json         POST _plugins/_ml/connectors/_create
  3. model.json             POST _plugins/_ml/models/_register?deploy=true   (then wait for the task,
                            then for GET _plugins/_ml/models/<id> to say model_state DEPLOYED)
  4. search-pipeline.json   PUT  _search/pipeline/<name>        (a `rerank` response processor)
  5. optional: index.json + the questions of a SemEval file, and one query.json search

Standard library only (es_plugin_bridge's SemEval reader and ``rerank_text`` are imported only for
--index-sample).
``{{NAME}}`` placeholders are filled with JSON-escaped values; ``${...}`` is ml-commons' own syntax
and is sent unchanged. Exit 2 with one line on any refusal.

  python mappings/opensearch/apply.py --opensearch-url http://localhost:9201 \
      --sidecar-url http://sidecar:8080 [--token T] [--index-sample FILE.xml] [--query TEXT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PIPELINE = "esrerank-rerank"
INDEX = "esrerank-questions"
#: The one field the rerank processor sends per hit (search-pipeline.json): title and HTML body, the
#: same string Elasticsearch's native mode stores (es_plugin_bridge.elastic.mappings.rerank_text).
RERANK_FIELD = "rerank_text"


class Refused(Exception):
    """OpenSearch answered with an error, or not at all."""


def render(name: str, **values: str) -> dict[str, Any]:
    """Load ``HERE/name`` with every ``{{KEY}}`` replaced by the JSON-escaped value; unknown keys fail."""
    text = (HERE / name).read_text(encoding="utf-8")

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"{name}: no value for {{{{{key}}}}}")
        return json.dumps(str(values[key]))[1:-1]

    return json.loads(re.sub(r"\{\{([A-Z_]+)\}\}", fill, text))


def trusted_url_regex(sidecar_url: str) -> str:
    """A regex matching exactly the connector's URL (ml-commons matches the whole URL)."""
    return "^" + re.escape(sidecar_url.rstrip("/") + "/v1/rerank?all_unscored=refuse") + "$"


class OpenSearch:
    def __init__(self, url: str, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        content = "application/x-ndjson" if isinstance(body, bytes) else "application/json"
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method,
                                         headers={"Content-Type": content})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:400]
            raise Refused(f"{method} {path}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise Refused(f"OpenSearch at {self.url} is unreachable: {getattr(exc, 'reason', exc)}") from None


TRUSTED = "plugins.ml_commons.trusted_connector_endpoints_regex"


def trusted_endpoints(os_: OpenSearch) -> list[str]:
    """The URL patterns the cluster trusts now: persistent, else transient, else the node's own
    setting (``opensearch.yml``) or ml-commons' default list, as OpenSearch resolves a setting."""
    settings = os_.call("GET", "/_cluster/settings?include_defaults=true&flat_settings=true")
    for scope in ("persistent", "transient", "defaults"):
        found = sorted(k for k in settings.get(scope, {}) if k == TRUSTED or k.startswith(TRUSTED + "."))
        if found:
            value = settings[scope].get(TRUSTED)
            return list(value) if isinstance(value, list) else [settings[scope][key] for key in found]
    return []


def configure(os_: OpenSearch, sidecar_url: str, token: str, *, deploy_timeout: float = 120.0,
              pipeline: str = PIPELINE) -> str:
    """Steps 1–4; returns the model id. Re-running creates a new connector and model (ids are new).

    The setting that lists trusted connector URLs is one list for the whole cluster: the sidecar's
    pattern is added to the patterns already there (other connectors keep working), not put instead."""
    sidecar_url = sidecar_url.rstrip("/")
    settings = render("cluster-settings.json", SIDECAR_RERANK_URL_REGEX=trusted_url_regex(sidecar_url))
    ours = settings["persistent"][TRUSTED]
    settings["persistent"][TRUSTED] = [*[p for p in trusted_endpoints(os_) if p not in ours], *ours]
    os_.call("PUT", "/_cluster/settings", settings)
    connector = os_.call("POST", "/_plugins/_ml/connectors/_create",
                         render("connector.json", SIDECAR_URL=sidecar_url, SIDECAR_TOKEN=token))
    print(f"connector {connector['connector_id']}")
    registered = os_.call("POST", "/_plugins/_ml/models/_register?deploy=true",
                          render("model.json", CONNECTOR_ID=connector["connector_id"]))
    deadline = time.monotonic() + deploy_timeout
    model_id = wait_for_registration(os_, registered, deadline)
    wait_for_deployment(os_, model_id, deadline)
    print(f"model {model_id} deployed")
    os_.call("PUT", f"/_search/pipeline/{pipeline}", render("search-pipeline.json", MODEL_ID=model_id))
    print(f"search pipeline {pipeline}")
    return model_id


def wait_for_registration(os_: OpenSearch, registered: dict[str, Any], deadline: float,
                          poll: float = 1.0) -> str:
    """The model id once the register task is ``COMPLETED``.

    That only means the model document is indexed (ml-commons' ``MLModelManager.indexRemoteModel``
    completes the task, then starts the deployment): :func:`wait_for_deployment` waits for the rest.
    """
    task_id = registered.get("task_id")
    if task_id is None:  # an answer with the model id and no task
        return registered["model_id"]
    while True:
        task = os_.call("GET", f"/_plugins/_ml/tasks/{task_id}")
        if task.get("state") == "COMPLETED":
            return task.get("model_id") or registered["model_id"]
        if task.get("state") in ("FAILED", "COMPLETED_WITH_ERROR"):
            raise Refused(f"model registration task {task_id}: {task.get('state')} {task.get('error', '')}")
        if time.monotonic() > deadline:
            raise Refused(f"model registration task {task_id} still {task.get('state')} at the deadline")
        time.sleep(poll)


def wait_for_deployment(os_: OpenSearch, model_id: str, deadline: float, poll: float = 1.0) -> None:
    """Return once ``GET _plugins/_ml/models/<id>`` says ``model_state: DEPLOYED``; Refused (one line)
    when it says ``DEPLOY_FAILED`` or the deadline passes (the states of ml-commons' ``MLModelState``)."""
    state = None
    while True:
        model = os_.call("GET", f"/_plugins/_ml/models/{model_id}")
        state = model.get("model_state")
        if state == "DEPLOYED":
            return
        if state == "DEPLOY_FAILED":
            raise Refused(f"model {model_id} is DEPLOY_FAILED; OpenSearch's log says why (is the sidecar's "
                          "URL trusted by cluster-settings.json and reachable from OpenSearch?)")
        if time.monotonic() > deadline:
            raise Refused(f"model {model_id} not deployed in time: model_state is {state}")
        time.sleep(poll)


def question_document(question: Any) -> dict[str, str]:
    """The indexed document of a question: its parts, and the one rerank field holding both."""
    from es_plugin_bridge.elastic.mappings import rerank_text

    return {"id": question.id, "title": question.title, "body": question.body,
            RERANK_FIELD: rerank_text(question)}


def index_semeval(os_: OpenSearch, path: str, index: str = INDEX) -> int:
    """Index every question of a SemEval file (original and related) into ``index``; returns the count."""
    from es_plugin_bridge.data.spec import read_spec

    dataset = read_spec(f"semeval:{path}")
    return index_questions(os_, [q for rq in dataset.queries for q in rq.candidates], index)


def index_questions(os_: OpenSearch, questions: list[Any], index: str = INDEX) -> int:
    """(Re)create ``index`` from index.json and fill it with the questions (one per id); returns the count."""
    unique = {q.id: q for q in questions}
    with contextlib.suppress(Refused):  # a first run has no index to delete
        os_.call("DELETE", f"/{index}")
    os_.call("PUT", f"/{index}", render("index.json"))
    lines = []
    for q in unique.values():
        lines.append(json.dumps({"index": {"_index": index, "_id": q.id}}))
        lines.append(json.dumps(question_document(q)))
    answer = os_.call("POST", "/_bulk?refresh=true", ("\n".join(lines) + "\n").encode())
    if answer.get("errors"):
        failed = [i for i in answer["items"] if i["index"].get("error")]
        raise Refused(f"bulk: {len(failed)} of {len(unique)} questions failed: "
                      f"{failed[0]['index']['error']}")
    print(f"indexed {len(unique)} questions into {index}")
    return len(unique)


def search(os_: OpenSearch, query: str, *, index: str = INDEX, pipeline: str | None = PIPELINE,
           ) -> list[dict[str, Any]]:
    """One search of query.json: reranked through ``pipeline`` (the hits' ``_score`` is then the
    sidecar's relevance score), or the first stage alone with ``pipeline=None``."""
    body = render("query.json", QUERY=query)
    suffix = f"?search_pipeline={pipeline}" if pipeline else ""
    if not pipeline:
        body.pop("ext")  # the rerank context means nothing without the pipeline
    answer = os_.call("POST", f"/{index}/_search{suffix}", body)
    return answer["hits"]["hits"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--opensearch-url", default=os.environ.get("ESRERANK_OPENSEARCH_URL", "http://localhost:9201"))
    parser.add_argument("--sidecar-url", required=True, help="The sidecar's URL as OpenSearch reaches it.")
    parser.add_argument("--token", default=os.environ.get("ESRERANK_TOKEN", ""),
                        help="The sidecar's bearer token (default: ESRERANK_TOKEN).")
    parser.add_argument("--index-sample", metavar="SEMEVAL_XML", help="Also index this file's questions.")
    parser.add_argument("--query", default="Where can I buy a good used car in Doha?",
                        help="The reranked search run at the end (with --index-sample).")
    args = parser.parse_args(argv)
    os_ = OpenSearch(args.opensearch_url)
    try:
        configure(os_, args.sidecar_url, args.token or "no-token")
        if args.index_sample:
            index_semeval(os_, args.index_sample)
            for hit in search(os_, args.query):
                print(f"{hit['_score']:.4f}  {hit['_id']}  {hit['_source']['title'][:70]}")
    except (Refused, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
