"""Options for reaching Elasticsearch and the sidecar, shared by ``esrerank es ...`` and
``esrerank evaluate --engine elasticsearch``; every one also has an environment variable. And
``--engine`` itself, whose choices and default are the engine registry's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from es_plugin_bridge.bridge.sidecar_target import DEFAULT_TIMEOUT, DEFAULT_URL
from es_plugin_bridge.defaults import DEFAULT_ES_URL

F = Callable[..., Any]


class EngineChoice(click.Choice):
    """The registered engines, read from the registry each time click asks: an engine registered after
    this module was imported (by a plug-in, or a test) is offered and accepted too."""

    def __init__(self) -> None:
        super().__init__((), case_sensitive=True)

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        from es_plugin_bridge.engines.registry import engine_names

        return tuple(engine_names())

    @choices.setter
    def choices(self, value: Any) -> None:
        """click's constructor sets the choices; the registry holds them, so this keeps nothing."""


def engine_option(help_text: str) -> Callable[[F], F]:
    """``--engine NAME``: one of the registered engines, the registry's default when omitted."""
    from es_plugin_bridge.engines.registry import default_engine

    return click.option("--engine", type=EngineChoice(), default=default_engine(), show_default=True,
                        help=help_text)


#: The options that reach Elasticsearch (or OpenSearch), declared once: flag, parameter name, attributes.
CONNECTION_OPTIONS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--es-url",), {"envvar": "ESRERANK_ES_URL", "default": DEFAULT_ES_URL, "show_default": True,
                     "help": "Elasticsearch URL [env ESRERANK_ES_URL]."}),
    (("--es-api-key",), {"envvar": "ESRERANK_ES_API_KEY", "default": None,
                         "help": "API key (encoded) [env ESRERANK_ES_API_KEY]."}),
    (("--es-username",), {"envvar": "ESRERANK_ES_USERNAME", "default": None,
                          "help": "Basic-auth user [env ESRERANK_ES_USERNAME]."}),
    (("--es-password",), {"envvar": "ESRERANK_ES_PASSWORD", "default": None,
                          "help": "Basic-auth password [env ESRERANK_ES_PASSWORD]."}),
    (("--es-ca-certs",), {"envvar": "ESRERANK_ES_CA_CERTS", "default": None,
                          "type": click.Path(dir_okay=False),
                          "help": "CA certificate file [env ESRERANK_ES_CA_CERTS]."}),
    (("--es-timeout",), {"default": 30.0, "show_default": True, "type": click.FloatRange(min=0.1),
                         "help": "Seconds per Elasticsearch request."}),
]


def connection_options(fn: F) -> F:
    """The options that reach Elasticsearch (:data:`CONNECTION_OPTIONS`) as decorators: URL, API key or
    user and password, CA file, timeout."""
    for decls, attrs in reversed(CONNECTION_OPTIONS):
        fn = click.option(*decls, **attrs)(fn)
    return fn


#: The sidecar's options, declared once for every command that calls it (``es setup``, ``es index``,
#: ``es search``, ``es evaluate``): one default per setting.
SIDECAR_OPTIONS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--sidecar", "sidecar_url"),
     {"envvar": "ESRERANK_SIDECAR_URL", "default": DEFAULT_URL, "show_default": True,
      "help": "The sidecar as this machine reaches it [env ESRERANK_SIDECAR_URL]."}),
    (("--token",), {"envvar": "ESRERANK_TOKEN", "default": None,
                    "help": "Sidecar bearer token [env ESRERANK_TOKEN]."}),
    (("--timeout",), {"default": DEFAULT_TIMEOUT, "show_default": True, "type": click.FloatRange(min=0.001),
                      "help": "Seconds to wait for the sidecar per call (bridge mode falls back to the "
                              "first stage after it)."}),
    (("--sidecar-ca-certs",), {"envvar": "ESRERANK_SIDECAR_CA_CERTS", "default": None,
                               "type": click.Path(dir_okay=False),
                               "help": "CA file (PEM) an https:// sidecar's certificate is checked against; "
                                       "default: the system's [env ESRERANK_SIDECAR_CA_CERTS]."}),
]


def sidecar_options(fn: F) -> F:
    """``--sidecar URL``, ``--token``, ``--timeout``, ``--sidecar-ca-certs`` (:data:`SIDECAR_OPTIONS`) as
    decorators."""
    for decls, attrs in reversed(SIDECAR_OPTIONS):
        fn = click.option(*decls, **attrs)(fn)
    return fn


def sidecar_option(name: str, **overrides: Any) -> Callable[[F], F]:
    """One of :data:`SIDECAR_OPTIONS` by its flag, as a decorator (``overrides``: e.g. ``--sidecar``
    optional, for a command that also runs without a sidecar)."""
    decls, attrs = next((d, a) for d, a in SIDECAR_OPTIONS if d[0] == name)
    return click.option(*decls, **{**attrs, **overrides})


def sidecar_click_options() -> list[click.Option]:
    """The same options as ``click.Option`` objects, for a command built from a parameter list."""
    return [click.Option(list(decls), **attrs) for decls, attrs in SIDECAR_OPTIONS]


def sidecar_target(sidecar_url: str, token: str | None, timeout: float,
                   sidecar_ca_certs: str | None = None) -> Any:
    """The :class:`SidecarTarget` the options describe (checked once, there)."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget

    return SidecarTarget(sidecar_url, token, timeout, sidecar_ca_certs)


def connection(
    es_url: str,
    es_api_key: str | None,
    es_username: str | None,
    es_password: str | None,
    es_ca_certs: str | None,
    es_timeout: float,
) -> Any:
    """The ``Connection`` the options describe (checked: one auth kind, a readable CA file)."""
    from es_plugin_bridge.elastic.cluster.connection import Connection

    conn = Connection(
        url=es_url,
        api_key=es_api_key,
        username=es_username,
        password=es_password,
        ca_certs=es_ca_certs,
        timeout=es_timeout,
    )
    conn.check()
    return conn


CONNECTION_KEYS = ("es_url", "es_api_key", "es_username", "es_password", "es_ca_certs", "es_timeout")


def pop_connection(kwargs: dict[str, Any], engine: str | None = None) -> Any:
    """Take the connection options out of a command's keyword arguments; their ``Connection``.
    ``engine``: the one the user chose (``--engine opensearch``), which errors name until it answers."""
    from dataclasses import replace

    return replace(connection(**{key: kwargs.pop(key) for key in CONNECTION_KEYS}), engine_name=engine)
