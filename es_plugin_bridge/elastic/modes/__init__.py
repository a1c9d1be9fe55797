"""The search modes, one module each, and their registry: per mode, its name, the engines it runs on,
what it needs and how it is built. Everything that lists modes reads the registry: the ``--mode``
choices of ``es search`` and ``es evaluate``, the modes that need stored vectors, the version and
licence table :func:`require` checks a cluster against (the cluster package knows no mode), the modes
the results index accepts and the docs' table.

A mode's module holds all of it: its registry entry (:func:`register_mode`), its class (a
:class:`~.base.Mode` that implements ``rank``), its builder and what a throw-away run must register for
it (``prepare``). ``hybrid`` holds the two modes that share the two windows (``hybrid``, ``hybrid-rrf``).
Adding a mode means adding a module here and its tests. ``base`` (what all modes share) and ``factory``
(building one by name) are not modes. Modules here stay cheap to import: listing the modes for
``--help`` loads no search client (``queries`` loads the DSL on first use).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from es_plugin_bridge.elastic.cluster.dialect import ELASTICSEARCH, display_name
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.plugins import Registry


class ClusterInfo(Protocol):
    """What the registry reads of ``cluster.connection.ClusterInfo``: the engine, its version and licence
    (:func:`require` checks a mode's or a feature's needs against them; the cluster knows no mode)."""

    engine: str
    version: tuple[int, int, int]
    licence: str
    licence_active: bool

    @property
    def paid(self) -> bool: ...


class IndexMeta(Protocol):
    """What the registry reads of ``setup.IndexMeta``; a mode's ``rule`` receives the whole meta."""

    pairwise: bool
    model: str
    model_type: str

    @property
    def no_vectors_reason(self) -> str | None: ...



__all__ = ["FEATURE_REQUIREMENTS", "ModeOption", "ModeSpec", "mode_names", "mode_options", "mode_spec",
           "readiness_lines", "register_mode", "require", "requirements", "suggested_mode", "vector_modes"]


@dataclass(frozen=True)
class ModeOption:
    """A command-line option a mode declares in its own module, so that ``es search`` offers it without
    the CLI naming it: ``flag`` (``--knn``), ``dest`` (the ``ModeOptions`` field, or a key of its
    ``extra``), ``choices`` (empty: any text), ``help``. Several modes may declare the same ``dest``; the
    first in ``--help`` order is offered."""

    flag: str
    dest: str
    help: str
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModeSpec:
    """One mode. ``requires``: per engine it runs on, the cluster version and licence it needs there, in
    :func:`require`'s shape (``version``: {major: (major, first minor)}, ``version_text``,
    ``licence``, ``why``); an engine it does not name needs nothing;
    ``builder``: ``build(stage, meta: IndexMeta, options: ModeOptions) -> Mode``
    (``modes.base.ModeOptions``: window, sidecar, cluster, allow_rerank_failures, knn);
    ``ranker``: the in-process ranker whose order the mode gives (``es evaluate`` reports the mode under
    that name); ``order``: its place in ``--help``;
    ``prepare``: ``prepare(client, index, meta, sidecar_url, token, cluster, stack) -> meta``, what a
    throw-away run (``es evaluate``) must register before the mode can search its index (an inference
    endpoint, a search pipeline), with its removal put on ``stack``; None: nothing;
    ``sidecar``: who calls the sidecar, and for what; ``options``: the mode's own CLI options
    (:class:`ModeOption`); ``rule``: ``rule(cluster, meta) -> reason | None``, what the mode needs of the
    index beyond the registry's fields (a pipeline, an endpoint, a fit), read by :meth:`unavailable`;
    ``support``: per engine, the versions and licence
    in words where a feature upgrades the mode beyond ``requires`` (one call instead of two); the docs'
    modes table is drawn from these fields (``docs/hooks/modes.py``); ``suggest``: the mode's place among
    those ``es search`` may run without ``--mode`` (:func:`suggested_mode`: the lowest that is ready on
    the cluster and the index), None: never chosen for the user."""

    name: str
    builder: Callable[..., Any]
    summary: str
    engines: tuple[str, ...] = ("elasticsearch",)
    needs_vectors: bool = False
    requires: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    ranker: str = "fused"
    order: int = 0
    prepare: Callable[..., Any] | None = None
    sidecar: str = ""
    support: Mapping[str, str] = field(default_factory=dict)
    options: tuple[ModeOption, ...] = ()
    rule: Callable[[ClusterInfo, IndexMeta], str | None] | None = None
    suggest: int | None = None

    def unavailable(self, cluster: ClusterInfo, meta: IndexMeta) -> str | None:
        """Why this mode cannot run on ``cluster`` over an index of ``meta``, or None; nothing is built
        or asked of the cluster. One answer for ``make_mode``, ``es setup``'s readiness lines and the
        tests: the engine, the version and licence (``requires``), the model's vectors, then ``rule``."""
        refusal = self.vectors_refusal(meta)
        if refusal is not None:
            return refusal
        try:
            require(cluster, self.name)
        except UserError as exc:
            return str(exc)
        return self.rule(cluster, meta) if self.rule is not None else None

    def vectors_refusal(self, meta: IndexMeta) -> str | None:
        """Why the mode cannot search an index whose model has no vector per text (a pairwise model,
        ``meta.pairwise``, what ``es setup`` read from the model directory), or None."""
        if not (self.needs_vectors and meta.pairwise):
            return None
        return (f"mode {self.name} needs the model's vectors; {meta.model} ({meta.model_type}) reads a "
                "query and a document together and has no vectors: use --mode native or --mode bridge")

    def engine_text(self, engine: str) -> str:
        """What this mode needs of ``engine`` in words: ``support``'s text, else ``requires``' version and
        licence, else "any"; "—" where the mode does not run on it."""
        if engine not in self.engines:
            return "—"
        if engine in self.support:
            return self.support[engine]
        needs = self.requirements(engine)
        version = needs.get("version_text", "any version")
        licence = "enterprise or trial licence" if needs.get("licence") else "any licence"
        return f"{version}, {licence}"

    def requirements(self, engine: str) -> Mapping[str, Any]:
        """What this mode needs of a cluster of ``engine`` (nothing when the entry names none)."""
        return self.requires.get(engine, {})


_MODES: Registry[ModeSpec] = Registry("mode", __name__, skip=("base", "factory"))


def register_mode(spec: ModeSpec) -> ModeSpec:
    return _MODES.add(spec.name, spec)


def _sorted() -> list[ModeSpec]:
    return sorted(_MODES.values(), key=lambda spec: (spec.order, spec.name))


def mode_names(engine: str | None = None) -> tuple[str, ...]:
    """The modes (those that run on ``engine``, when given), in ``--help`` order."""
    return tuple(s.name for s in _sorted() if engine is None or engine in s.engines)


def vector_modes() -> tuple[str, ...]:
    """The modes that search the stored vectors or embed the query: an index without vectors, or a
    pairwise model (no vector per text), cannot run them."""
    return tuple(s.name for s in _sorted() if s.needs_vectors)


def mode_spec(name: str) -> ModeSpec:
    """The registered mode ``name``; a one-line UserError listing the modes when there is none."""
    known = mode_names()
    if name not in known:
        raise UserError(f"unknown mode {name!r} (known: {', '.join(known)})")
    return _MODES.get(name)


def mode_options() -> tuple[ModeOption, ...]:
    """Every mode's own CLI options, one per ``dest``, in ``--help`` order of the modes."""
    seen: dict[str, ModeOption] = {}
    for spec in _sorted():
        for option in spec.options:
            seen.setdefault(option.dest, option)
    return tuple(seen.values())


def readiness_lines(cluster: ClusterInfo, meta: IndexMeta, written: Collection[str]) -> list[str]:
    """``es setup``'s line for each mode of ``cluster``'s engine that ``written`` (the modes whose lines
    say more, such as how many calls) leaves out: ready, or unavailable and why
    (:meth:`ModeSpec.unavailable`)."""
    lines = []
    for name in mode_names(cluster.engine):
        if name not in written:
            reason = _not_ready(mode_spec(name), cluster, meta)
            lines.append(f"mode {name}: " + ("ready" if reason is None else f"unavailable ({reason})"))
    return lines


def suggested_mode(cluster: ClusterInfo, meta: IndexMeta) -> str:
    """The mode ``es search`` runs without ``--mode`` (and ``es setup``'s last line names): of the modes
    that declare a ``suggest`` place, the first that is ready on ``cluster`` over an index of ``meta``
    (:meth:`ModeSpec.unavailable`). None ready: the last of them, whose builder then says why."""
    offered = sorted((s for s in _MODES.values() if s.suggest is not None),
                     key=lambda spec: (spec.suggest, spec.name))
    ready = [spec.name for spec in offered if _not_ready(spec, cluster, meta) is None]
    return ready[0] if ready else offered[-1].name


def _not_ready(spec: ModeSpec, cluster: ClusterInfo, meta: IndexMeta) -> str | None:
    """:meth:`ModeSpec.unavailable`, or first that the index holds no vectors where the mode needs them
    (the builders refuse it naming the index; a readiness line and the suggestion need the reason only)."""
    reason = meta.no_vectors_reason if spec.needs_vectors else None
    return reason or spec.unavailable(cluster, meta)


#: What the two features that are not modes need (a mode's own needs are in its registry entry), read by
#: :func:`requirements`: the modes that use them ask for them by name.
FEATURE_REQUIREMENTS: dict[str, dict[str, Any]] = {
    # allow_rerank_failures on text_similarity_reranker: 8.19 / 9.1 (TextSimilarityRankRetrieverBuilder)
    "native-allow-failures": {
        "version": {8: (8, 19), 9: (9, 1)},
        "version_text": "8.19+ or 9.1+ (for allow_rerank_failures)",
    },
    # rescorer retriever (8.18/9.0) over a linear retriever (8.18/9.0): the one-call variant.
    "vectors-retriever": {
        "version": {8: (8, 18), 9: (9, 0)},
        "version_text": "8.18+ or 9.0+",
        "licence": True,
        "why": "the linear retriever",
    },
}


def requirements(name: str, engine: str = ELASTICSEARCH) -> Mapping[str, Any]:
    """What a mode (from its registry entry, for ``engine``) or a feature (Elasticsearch's) needs of the
    cluster."""
    if name in FEATURE_REQUIREMENTS:
        return FEATURE_REQUIREMENTS[name]
    return mode_spec(name).requirements(engine)


def require(cluster: ClusterInfo, name: str) -> None:
    """UserError naming the engine, version or licence mode (or feature) ``name`` needs when ``cluster``
    lacks it."""
    engine, version_text = display_name(cluster.engine), ".".join(map(str, cluster.version))
    if name not in FEATURE_REQUIREMENTS and name not in mode_names(cluster.engine):
        raise UserError(f"mode {name} does not run on {engine} {version_text}; its modes: "
                        f"{', '.join(mode_names(cluster.engine))}")
    need = requirements(name, cluster.engine)
    version = need.get("version")
    if version is not None and not _version_ok(cluster.version, version):
        raise UserError(f"mode {name} needs {engine} {need['version_text']}; this cluster is {version_text}")
    if need.get("licence") and not cluster.paid:
        raise UserError(
            f"mode {name} needs an enterprise or trial licence ({need['why']}); this cluster "
            f"has {cluster.licence!r}{'' if cluster.licence_active else ' (expired)'}. Start a trial "
            "(POST _license/start_trial?acknowledge=true) or use --mode vectors or bridge"
        )


def _version_ok(have: tuple[int, int, int], need: Mapping[int, tuple[int, int]]) -> bool:
    """``need`` maps a major version to its first minor with the feature (8 → 19, 9 → 1)."""
    major = have[0]
    if major > max(need):
        return True
    return major in need and have[1:] >= (need[major][1], 0)
