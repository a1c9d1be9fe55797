"""ml-commons calls that every sidecar model ``es setup`` registers on OpenSearch shares: trusting the
sidecar's URL, creating an HTTP connector, registering a remote model and waiting until it is deployed.

The rerank model (``elastic/modes/rerank.py``) and the two embedding models of the ingest pipeline
(``elastic/opensearch_ingest.py``) differ only in their connector's body; the steps, and their rules
found on ml-commons 2.19.1, are here once:

- ``plugins.ml_commons.trusted_connector_endpoints_regex`` is one list for the whole cluster and a
  pattern must match the connector's whole URL (``MLCommonsSettings``, ``ConnectorUtils``): each URL is
  added beside those already trusted, never in their place;
- a sidecar on a private address (127.0.0.1 in the tests) needs ``connector.private_ip_enabled``;
- ``_register?deploy=true`` answers a task; its ``COMPLETED`` only means the model document is written,
  so the model's own ``model_state`` is then read until ``DEPLOYED`` (``PARTIALLY_DEPLOYED`` on a
  cluster: deployed again, one deployment at a time, which reaches the nodes that missed it).

Every call is opensearch-py's own method (``plugins.ml``, ``search_pipeline``, ``ingest``, ``cluster``):
``plugins.ml.get_model`` and the rest the product calls are all there from opensearch-py 3.0 (checked
in its tags: 2.7 had ``register_model``/``get_task``/``deploy_model``, 2.8 added ``create_connector``,
3.0 ``get_model``; ``search_pipeline`` since 2.6), the version ``pyproject.toml`` requires.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.elastic.cluster.connection import call
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.opensearch_client import OpenSearchClient

log = logging.getLogger(__name__)

TRUSTED = "plugins.ml_commons.trusted_connector_endpoints_regex"
DEPLOY_SECONDS = 120.0
#: Tries of the first ml-commons write while its master key is being made (``_first_write``).
MASTER_KEY_TRIES = 3
#: Deployments after a first one that left the model ``PARTIALLY_DEPLOYED`` (``wait_deployed``).
REDEPLOYS = 3


def ml(client: OpenSearchClient) -> Any:
    """opensearch-py's ml-commons client (``plugins.ml``) of the product's OpenSearch client."""
    return client.raw.plugins.ml


def request(client: OpenSearchClient, what: str, fn: Any, **kwargs: Any) -> dict[str, Any]:
    """One opensearch-py call, ``fn(**kwargs)``; a refusal is a one-line UserError saying ``what`` failed."""
    return call(what, fn, **kwargs)


def url_regex(sidecar_url: str, path: str) -> str:
    """A regex matching exactly ``sidecar_url`` + ``path`` (ml-commons matches the whole URL)."""
    return "^" + re.escape(sidecar_url.rstrip("/") + path) + "$"


def trusted_endpoints(client: OpenSearchClient) -> list[str]:
    """The URL patterns the cluster trusts now (persistent, else transient, else the node's default)."""
    settings = request(client, "reading the cluster settings", client.raw.cluster.get_settings,
                       include_defaults=True, flat_settings=True)
    for scope in ("persistent", "transient", "defaults"):
        value = settings.get(scope, {}).get(TRUSTED)
        if value is not None:
            return list(value) if isinstance(value, list) else [value]
    return []


def trust(client: OpenSearchClient, patterns: Iterable[str]) -> None:
    """Trust ``patterns`` beside the patterns the cluster trusts already; allow private addresses and
    remote models on a node without the ML role."""
    ours = list(dict.fromkeys(patterns))
    kept = [p for p in trusted_endpoints(client) if p not in ours]
    request(client, "trusting the sidecar's URL", client.raw.cluster.put_settings, body={"persistent": {
        TRUSTED: kept + ours, "plugins.ml_commons.connector.private_ip_enabled": True,
        "plugins.ml_commons.only_run_on_ml_node": False}})


def register_remote_model(client: OpenSearchClient, connector: Mapping[str, Any], name: str, description: str,
                          deploy_timeout: float = DEPLOY_SECONDS) -> tuple[str, str]:
    """Create the connector, register a ``remote`` model on it and wait until it is deployed:
    (connector id, model id)."""
    created = _first_write(client, f"creating the ml-commons connector {connector.get('name')}",
                           ml(client).create_connector, body=dict(connector))
    registered = request(client, f"registering the remote model {name}", ml(client).register_model,
                         body={"name": name, "function_name": "remote", "description": description,
                               "connector_id": created["connector_id"]}, params={"deploy": "true"})
    model_id = wait_deployed(client, registered, time.monotonic() + deploy_timeout)
    return str(created["connector_id"]), model_id


def _first_write(client: OpenSearchClient, what: str, fn: Any, **kwargs: Any) -> dict[str, Any]:
    """``request``, tried again (3 times, 2 s apart) while ml-commons answers that fetching its master key
    timed out: on a fresh cluster of several nodes the first connector can meet that while the key is
    being made (found on three 2.19.1 nodes); the next try finds it."""
    for attempt in range(MASTER_KEY_TRIES):
        try:
            return request(client, what, fn, **kwargs)
        except UserError as exc:
            if "master key timed out" not in str(exc) or attempt == MASTER_KEY_TRIES - 1:
                raise
            time.sleep(2.0)
    raise AssertionError("unreachable")


def wait_deployed(client: OpenSearchClient, registered: Mapping[str, Any], deadline: float) -> str:
    """The model id once ml-commons says ``DEPLOYED`` (the register task first, then the model).

    ``PARTIALLY_DEPLOYED`` (a node failed its share; on a fresh cluster of several nodes a node can time
    out fetching ml-commons' master key, found on three 2.19.1 nodes) is deployed again, one deployment
    at a time: each waits for the task before it to end (deployments started every few seconds can pile
    up on the slow node; CI once saw a model stay partial for two minutes that way). Still partial after
    ``REDEPLOYS`` tries or at the deadline, the model is kept with a warning naming each node's error:
    ml-commons sends a prediction to a node that holds the model (``MLModelManager.getWorkerNodes``), so
    it serves, on fewer nodes."""
    model_id = registered.get("model_id")
    task_id = registered.get("task_id")
    while model_id is None:
        task = request(client, "waiting for the model", ml(client).get_task, task_id=task_id)
        if task.get("state") in ("FAILED", "COMPLETED_WITH_ERROR"):
            raise UserError(f"registering the remote model failed: {task.get('error', task.get('state'))}")
        model_id = task.get("model_id") if task.get("state") == "COMPLETED" else None
        _check_deadline(deadline, f"task {task_id} is {task.get('state')}")
    redeploys = 0
    errors = ""
    while True:
        state = _model_state(client, model_id)
        if state == "DEPLOYED":
            return str(model_id)
        if state == "DEPLOY_FAILED":
            raise UserError(f"model {model_id} is DEPLOY_FAILED; OpenSearch's log says why (is the sidecar's "
                            f"URL reachable from OpenSearch?){' ' + errors if errors else ''}")
        if state == "PARTIALLY_DEPLOYED":
            if redeploys == REDEPLOYS or time.monotonic() > deadline:
                log.warning("warning: model %s is deployed on some nodes only (PARTIALLY_DEPLOYED after %d "
                            "deployments); ml-commons sends its predictions to those. %s", model_id,
                            redeploys + 1, errors or "OpenSearch's log says why the others refused.")
                return str(model_id)
            redeploys += 1
            errors = _redeploy(client, model_id, deadline)
            continue
        _check_deadline(deadline, f"model {model_id} is {state}")


def _model_state(client: OpenSearchClient, model_id: str) -> str | None:
    model = request(client, "waiting for the model", ml(client).get_model, model_id=model_id)
    return model.get("model_state")


def _redeploy(client: OpenSearchClient, model_id: str, deadline: float) -> str:
    """Deploy ``model_id`` again and wait until that deployment's task ends and the model's state is
    written after it; returns the nodes' errors the task recorded ("" when none)."""
    started = request(client, f"deploying model {model_id} again", ml(client).deploy_model, model_id=model_id)
    task_id = started.get("task_id")
    task: Mapping[str, Any] = {}
    while task_id is not None and task.get("state") not in ("COMPLETED", "COMPLETED_WITH_ERROR", "FAILED"):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
        task = request(client, "waiting for the model", ml(client).get_task, task_id=task_id)
    # TransportForwardAction writes the task, then the model: give the model's write a moment to land
    settle = time.monotonic() + 5.0
    while _model_state(client, model_id) == "DEPLOYING" and time.monotonic() < min(settle, deadline):
        time.sleep(0.5)
    error = task.get("error")
    return f"The nodes' errors: {error}" if error else ""


def _check_deadline(deadline: float, state: str) -> None:
    if time.monotonic() > deadline:
        raise UserError(f"the remote model was not deployed in time: {state}")
    time.sleep(0.5)
