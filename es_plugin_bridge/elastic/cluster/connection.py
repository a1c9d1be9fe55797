"""Connecting to Elasticsearch: options, client, and what the cluster can do (version, licence).

Every ``esrerank es ...`` command and ``--engine elasticsearch`` take the same options, also read
from the environment (``ESRERANK_ES_URL``, ``ESRERANK_ES_API_KEY``, ``ESRERANK_ES_USERNAME``,
``ESRERANK_ES_PASSWORD``, ``ESRERANK_ES_CA_CERTS``). An unreachable cluster or a refused
credential is a one-line ``UserError``, not a traceback.

``--es-url`` may name several nodes of one cluster, comma-separated: the client then sends each request
to one of them and, when a node does not answer (refused, reset), retries it on the next, so a command
outlives the node it was talking to (opensearch-py's and elastic-transport's ``Transport`` mark the node
dead and retry on another, up to ``max_retries``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from es_plugin_bridge.defaults import DEFAULT_ES_URL
from es_plugin_bridge.elastic.cluster.dialect import (
    ELASTICSEARCH,
    OPENSEARCH,
    display_name,
    engine_of,
    is_opensearch,
)
from es_plugin_bridge.elastic.cluster.engine_errors import reason_of
from es_plugin_bridge.elastic.cluster.search_client import SearchClient
from es_plugin_bridge.errors import UserError

T = TypeVar("T")
#: The client's first release with ``elasticsearch.dsl`` (typed queries, used by every request body).
MIN_CLIENT = (8, 18)
#: How messages name each engine.
#: The attribute a client made by :meth:`Connection.client` carries its cluster's ``GET /`` answer under.
ROOT_ATTRIBUTE = "esrerank_root"


def client_version() -> tuple[int, int, int]:
    """The installed elasticsearch-py's version."""
    import elasticsearch

    return _version_tuple(elasticsearch.__versionstr__)


def _version_tuple(text: str) -> tuple[int, int, int]:
    """``"9.1.4-SNAPSHOT"`` → (9, 1, 4); missing parts are 0."""
    parts = [int(p) for p in text.split("-")[0].split(".")[:3] if p.isdigit()]
    major, minor, patch = (parts + [0, 0, 0])[:3]
    return major, minor, patch


def install_command(cluster_major: int) -> str:
    """The pip line that installs a client able to talk to a cluster of this major version.

    elasticsearch-py sends ``Accept: application/vnd.elasticsearch+json; compatible-with=<its major>``
    and a cluster of an older major refuses every such request; a newer cluster accepts the previous
    major's header. Below 8.18 the client has no ``elasticsearch.dsl``.
    """
    if cluster_major <= 8:
        return "pip install 'elasticsearch>=8.18,<9'"
    return f"pip install 'elasticsearch>={cluster_major},<{cluster_major + 1}'"


def check_client_version(cluster_major: int, client: tuple[int, int, int] | None = None) -> None:
    """UserError, in one line with the fixing install command, when the client cannot serve the cluster."""
    have = client or client_version()
    text = ".".join(map(str, have))
    if have[:2] < MIN_CLIENT:
        raise UserError(
            f"elasticsearch-py {text} is too old (the product needs 8.18+ for elasticsearch.dsl); "
            f"install one for your cluster: {install_command(cluster_major)}"
        )
    if have[0] > cluster_major:
        raise UserError(
            f"elasticsearch-py {text} cannot talk to an Elasticsearch {cluster_major}.x cluster (it asks for "
            f"compatible-with={have[0]}, which {cluster_major}.x refuses); {install_command(cluster_major)}"
        )


@dataclass(frozen=True)
class Connection:
    """Where the cluster is and how to authenticate (API key, or username and password)."""

    url: str = DEFAULT_ES_URL
    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    ca_certs: str | None = None
    timeout: float = 30.0
    #: The engine the user chose (``--engine opensearch``), named in errors before ``GET /`` answers.
    engine_name: str | None = None

    @property
    def urls(self) -> list[str]:
        """The nodes ``--es-url`` names (comma-separated: several nodes of one cluster, for fail-over)."""
        return [url.strip() for url in self.url.split(",") if url.strip()] or [self.url]

    def check(self) -> None:
        for url in self.urls:
            if not url.startswith(("http://", "https://")):
                raise UserError(f"--es-url must start with http:// or https://, got {url!r}")
        if self.api_key and (self.username or self.password):
            raise UserError("give either --es-api-key or --es-username/--es-password, not both")
        if bool(self.username) != bool(self.password):
            raise UserError("--es-username and --es-password go together")
        if self.ca_certs and not os.path.isfile(self.ca_certs):
            raise UserError(f"--es-ca-certs {self.ca_certs}: no such file")

    @property
    def target(self) -> str:
        """How messages name the cluster before it has said what it is: the engine the user chose
        (``--engine opensearch``), else "the search engine", with the URL."""
        return f"{display_name(self.engine_name)} at {self.url}"

    def _headers(self) -> dict[str, str]:
        import base64

        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"ApiKey {self.api_key}"
        elif self.username:
            pair = f"{self.username}:{self.password}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return headers

    def _get(self, path: str, headers: Mapping[str, str]) -> tuple[int, Any]:
        """``(status, JSON answer or None)`` of ``GET url/path`` from the first of :attr:`urls` that
        answers; OSError (the last node's) when none does."""
        import json
        import ssl
        import urllib.error
        import urllib.request

        context = ssl.create_default_context(cafile=self.ca_certs) if self.ca_certs else None
        for n, url in enumerate(self.urls):
            request = urllib.request.Request(url.rstrip("/") + path, headers=dict(headers))
            try:
                timeout = min(self.timeout, 10.0)
                with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
                    status, raw = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, raw = exc.code, exc.read()
            except OSError:
                if n == len(self.urls) - 1:
                    raise
                continue
            break
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, None

    def _sidecar_path(self) -> str | None:
        """Where the URL answers as the esrerank sidecar (None: it does not): its open ``/readyz`` names
        a model and a ``dimension``, or its ``/healthz`` says ``{"status": "ok"}``
        (``serving/routes_ops.py``)."""
        for path, looks_like in (("/readyz", lambda a: {"model", "dimension"} <= set(a)),
                                 ("/healthz", lambda a: a == {"status": "ok"})):
            try:
                status, answer = self._get(path, {"Accept": "application/json"})
            except OSError:
                return None
            if status == 200 and isinstance(answer, dict) and looks_like(answer):
                return path
        return None

    @functools.cached_property
    def root(self) -> tuple[int, Any]:
        """``(status, answer)`` of the cluster's ``GET /``, asked once per connection: it says which
        engine this is and its version, and every later reader (:func:`cluster_info`) takes it from the
        client :meth:`client` made (``ROOT_ATTRIBUTE``) instead of asking again."""
        try:
            return self._get("/", self._headers())
        except OSError as exc:
            reason = getattr(exc, "reason", None) or exc
            raise UserError(f"{self.target} is unreachable ({reason}); check --es-url") from None

    def engine(self) -> str:
        """``opensearch`` when ``GET /`` names that distribution, else ``elasticsearch`` (also when the
        answer is an error such as 401: the Elasticsearch client then says what is wrong).

        Nothing answering is a one-line error naming :attr:`target` (the engine chosen, or "the search
        engine": nothing said which it is); a URL that answers as the esrerank sidecar instead of a
        search engine is an error saying so; so is one that answers as the other engine than the one
        chosen (``--engine``), so the name a run records is the engine that scored it."""
        _, info = self.root
        version = info.get("version") if isinstance(info, dict) else None
        sidecar = None if isinstance(version, dict) else self._sidecar_path()
        if sidecar:
            raise UserError(f"--es-url {self.url} answers as the esrerank sidecar (its {sidecar}), not as "
                            f"{display_name(self.engine_name, 'a search engine')}: --es-url takes "
                            "the Elasticsearch or OpenSearch URL, --sidecar the sidecar's")
        engine = engine_of(version)
        if self.engine_name is not None and isinstance(version, dict) and engine != self.engine_name:
            raise UserError(f"--engine {self.engine_name}, but {self.url} answers as {display_name(engine)} "
                            f"{version.get('number', '')}: use --engine {engine}")
        return engine

    def open(self) -> Cluster:
        """The cluster at ``url``: its client (:meth:`client`) and its :class:`ClusterInfo`, read once."""
        return Cluster.of(self.client())

    def client(self) -> SearchClient:
        """A client of the cluster at ``url``: elasticsearch-py's, or for an OpenSearch cluster (its
        ``GET /``) an :class:`~es_plugin_bridge.elastic.cluster.opensearch_client.OpenSearchClient`, which
        takes the same calls."""
        self.check()
        if is_opensearch(self.engine()):
            from es_plugin_bridge.elastic.cluster.opensearch_client import connect

            if self.api_key:
                raise UserError("OpenSearch takes --es-username/--es-password, not an API key")
            client = connect(self.urls, username=self.username, password=self.password,
                             ca_certs=self.ca_certs, timeout=self.timeout)
            return self._with_root(client)
        if client_version()[:2] < MIN_CLIENT:
            check_client_version(9)
        from es_plugin_bridge.elastic.cluster.elasticsearch_client import RETRY_ON_STATUS, WholeElasticsearch

        options: dict[str, Any] = {"request_timeout": self.timeout, "retry_on_status": RETRY_ON_STATUS}
        if self.api_key:
            options["api_key"] = self.api_key
        if self.username:
            options["basic_auth"] = (self.username, self.password)
        if self.ca_certs:
            options["ca_certs"] = self.ca_certs
        return self._with_root(WholeElasticsearch(self.urls, **options))

    def _with_root(self, client: T) -> T:
        """``client`` carrying this connection's ``GET /`` answer when it is a cluster's root document."""
        status, info = self.root
        if status == 200 and isinstance(info, dict) and isinstance(info.get("version"), dict):
            setattr(client, ROOT_ATTRIBUTE, info)
        return client


@contextmanager
def es_errors(what: str) -> Iterator[None]:
    """Turn the client's connection and API errors into one-line UserErrors naming ``what``."""
    from elastic_transport import ConnectionError as TransportConnectionError
    from elastic_transport import ConnectionTimeout
    from elasticsearch import ApiError, AuthenticationException, AuthorizationException
    from opensearchpy import exceptions as os_errors

    try:
        yield
    except os_errors.ConnectionError as exc:
        raise UserError(f"{what}: OpenSearch is unreachable ({exc.info or exc.error})") from None
    except os_errors.AuthenticationException:
        raise UserError(f"{what}: OpenSearch refused the credentials (401); check "
                        "--es-username/--es-password") from None
    except os_errors.TransportError as exc:
        raise UserError(f"{what}: OpenSearch{_at(getattr(exc, 'node', None))} answered {exc.status_code}: "
                        f"{reason_of(exc.info) or exc.error}") from None
    except (TransportConnectionError, ConnectionTimeout) as exc:
        raise UserError(f"{what}: Elasticsearch is unreachable ({exc.message})") from None
    except AuthenticationException:
        raise UserError(
            f"{what}: Elasticsearch refused the credentials (401); check --es-api-key or "
            "--es-username/--es-password"
        ) from None
    except AuthorizationException as exc:
        raise UserError(f"{what}: not allowed (403): {_reason(exc)}") from None
    except ApiError as exc:
        node = getattr(exc.meta, "node", None)
        where = f"{node.host}:{node.port}" if node is not None and getattr(node, "host", None) else None
        raise UserError(f"{what}: Elasticsearch{_at(where)} answered {exc.meta.status}: "
                        f"{_reason(exc)}") from None


def _reason(exc: Any) -> str:
    return reason_of(getattr(exc, "body", None)) or str(exc)


def _at(node: str | None) -> str:
    """`` at host:port`` of the node that answered, when known."""
    return f" at {node}" if node else ""


def call(what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` with :func:`es_errors`."""
    with es_errors(what):
        return fn(*args, **kwargs)


@dataclass(frozen=True)
class ClusterInfo:
    """The cluster's version and licence, to say which modes it can run before trying them."""

    version: tuple[int, int, int]
    licence: str  # basic, trial, gold, platinum, enterprise, ... or "unknown"; OpenSearch: "apache-2.0"
    licence_active: bool
    engine: str = ELASTICSEARCH  # or OPENSEARCH (GET /'s version.distribution)

    @property
    def is_opensearch(self) -> bool:
        """OpenSearch: ``es setup`` registers a search pipeline instead of inference endpoints. For
        ``cluster/`` and the tests: the rest of the product asks :meth:`for_engine` or a feature below."""
        return is_opensearch(self.engine)

    def for_engine(self, *, elasticsearch: T, opensearch: T) -> T:
        """The value given for this cluster's engine: how a flow that differs as a whole per engine
        (``es setup``'s registrations) chooses, without comparing engine names itself."""
        return opensearch if self.is_opensearch else elasticsearch

    @property
    def retrievers(self) -> bool:
        """Whether searches may use Elasticsearch's retrievers (``linear``, ``rescorer``, ``rrf``): the
        engine has them and the licence allows them (:attr:`paid`); each retriever's user still checks
        the version it arrived in. OpenSearch 2.19 has no retrievers."""
        return not self.is_opensearch and self.paid

    @property
    def hybrid_query(self) -> bool:
        """Whether the cluster fuses a first stage and a vector query in one search with neural-search's
        ``hybrid`` query and a normalisation search pipeline (OpenSearch 2.19+)."""
        return self.is_opensearch

    @property
    def knn_plugin(self) -> bool:
        """Whether vectors are the k-NN plugin's ``knn_vector`` (OpenSearch), searched with its ``knn``
        query and Painless functions, rather than Elasticsearch's ``dense_vector``."""
        return self.is_opensearch

    @property
    def name(self) -> str:
        """``Elasticsearch 9.1.0`` / ``OpenSearch 2.19.1``: how messages name the cluster."""
        return f"{display_name(self.engine)} {self.version_text}"

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))

    @property
    def paid(self) -> bool:
        """Enterprise-level features: the inference API (``custom`` service, ``inference`` processor),
        ``text_similarity_reranker``, ``linear`` and ``rrf``. Each is a ``LicensedFeature`` of
        ``License.OperationMode.ENTERPRISE`` (``InferencePlugin.INFERENCE_API_FEATURE``,
        ``TextSimilarityRankBuilder.TEXT_SIMILARITY_RERANKER_FEATURE``,
        ``RRFRankPlugin.LINEAR_RETRIEVER_FEATURE`` / ``RANK_RRF_FEATURE``), and
        ``XPackLicenseState.isAllowedByOperationMode`` allows TRIAL or a mode ≥ ENTERPRISE in the enum's
        order (MISSING, TRIAL, BASIC, STANDARD, GOLD, PLATINUM, ENTERPRISE): platinum is not enough."""
        return self.licence_active and self.licence in ENTERPRISE_LICENCES


ENTERPRISE_LICENCES = frozenset({"trial", "enterprise"})


@dataclass(frozen=True)
class Cluster:
    """What the product holds of a cluster once connected: its client (the calls of
    :class:`~es_plugin_bridge.elastic.cluster.search_client.SearchClient`) and what ``GET /`` and the
    licence said (:class:`ClusterInfo`), read once. Made by :meth:`Connection.open` and handed to the
    modes, ``es setup`` and ``es evaluate``, so none of them reads the engine off the client again."""

    client: SearchClient
    info: ClusterInfo

    @classmethod
    def of(cls, client: SearchClient) -> Cluster:
        """The cluster behind a client made elsewhere (a test's, a benchmark's): its info read once."""
        return cls(client, cluster_info(client))

    @property
    def name(self) -> str:
        return self.info.name

def _root_document(client: Any) -> dict[str, Any]:
    """``GET /`` through the transport with ``Accept: application/json`` (or the answer the client's
    :class:`Connection` already read the same way, ``ROOT_ATTRIBUTE``).

    The client itself rewrites every ``application/json`` Accept header into
    ``application/vnd.elasticsearch+json; compatible-with=<its major>`` (``_base.py``,
    ``mimetype_header_to_compat``), which an older major refuses; the transport sends headers as given.
    The client's own headers (authorisation, user agent) are kept.
    """
    known = getattr(client, ROOT_ATTRIBUTE, None)
    if known is not None:
        return known  # type: ignore[no-any-return]
    headers = dict(client._headers)  # the client's auth and identity headers; Accept is replaced
    for key in [k for k in headers if k.lower() in ("accept", "content-type")]:
        del headers[key]
    headers["Accept"] = "application/json"
    with es_errors("reading the cluster version"):
        response = client.transport.perform_request("GET", "/", headers=headers)
    meta, body = response.meta, response.body
    if meta.status == 401:
        raise UserError("reading the cluster version: Elasticsearch refused the credentials (401); check "
                        "--es-api-key or --es-username/--es-password")
    if meta.status >= 400 or not isinstance(body, dict) or "version" not in body:
        raise UserError(f"reading the cluster version: {client.transport.node_pool.get().base_url} answered "
                        f"{meta.status} to GET / (is it a search engine?)")
    return body


def cluster_info(client: SearchClient) -> ClusterInfo:
    """Version (``GET /``) and licence (``GET _license``; a cluster without it counts as basic).

    ``GET /`` is sent with a plain ``application/json`` Accept header, which every major answers, so a
    client of the wrong major is named (with its install command) before any request it would break.
    """
    if is_opensearch(client):
        answer = getattr(client, ROOT_ATTRIBUTE, None) or call("reading the cluster version", client.info)
        return ClusterInfo(_version_tuple(str(answer["version"]["number"])), "apache-2.0", True, OPENSEARCH)
    info = _root_document(client)
    version = _version_tuple(str(info["version"]["number"]))
    check_client_version(version[0])
    try:
        with es_errors("reading the licence"):
            lic = client.license.get()["license"]
        licence, active = str(lic.get("type", "unknown")), lic.get("status", "active") == "active"
    except UserError:
        licence, active = "unknown", False
    return ClusterInfo(version, licence, active)  # type: ignore[arg-type]
