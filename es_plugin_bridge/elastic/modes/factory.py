"""``make_mode``: the one place that builds a mode by name over a first stage, with the index meta's β
for it, through the mode's registry entry (each mode's module holds its builder); ``open_mode``: the
same over an existing index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
from es_plugin_bridge.elastic.modes import mode_options as registered_options
from es_plugin_bridge.elastic.modes import mode_spec
from es_plugin_bridge.elastic.modes.base import Mode, ModeOptions
from es_plugin_bridge.elastic.setup import IndexMeta, read_meta
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.connection import Cluster


def refuse_without_vectors(mode: str, meta: IndexMeta) -> None:
    """One-line UserError when ``mode`` needs vectors and the index's model has none per text (a
    pairwise model, the cross-encoder), naming the modes that do run; decided by ``meta.pairwise``,
    what ``es setup`` read from the model directory, so no search or sidecar call is made first."""
    refusal = mode_spec(mode).vectors_refusal(meta)
    if refusal is not None:
        raise UserError(refusal)


def make_mode(mode: str, stage: ElasticsearchFirstStage, meta: IndexMeta, **options: Any) -> Mode:
    """The mode ``mode`` over ``stage`` with the index meta's β for that first stage, built by its
    registry entry from :class:`ModeOptions` (``options`` are its fields); UserError naming what the
    cluster or the index lacks for it."""
    spec = mode_spec(mode)
    built = ModeOptions(**options)
    reason = spec.unavailable(built.cluster, meta)  # the mode's own rule (its registry entry)
    if reason is not None:
        raise UserError(reason)
    return spec.builder(stage, meta, built)


def open_mode(cluster: Cluster, index: str, mode: str | None, first_stage: str, *, window: int,
              sidecar: SidecarTarget, allow_rerank_failures: bool = False, global_statistics: bool = True,
              **mode_options: Any) -> Mode:
    """Mode ``mode`` over an existing index of ``cluster`` (``Connection.open()``; ``Cluster.of(client)``
    for a client made elsewhere) (``es search``): its meta, its first stage;
    ``mode`` None: the index's best on this cluster (``IndexMeta.suggested_mode``); ``global_statistics``
    False: each shard scores with its own statistics (``elastic/cluster/shards.py``); ``mode_options``:
    the values of the modes' own CLI options by ``dest`` (``ModeSpec.options``: ``knn="hnsw"``), None
    where not given; a :class:`ModeOptions` field where one has the name (``knn``), else in its
    ``extra``. A keyword no mode declares is a TypeError, as for any function."""
    from es_plugin_bridge.elastic.engine import open_engine
    from es_plugin_bridge.engines.registry import EngineContext
    from es_plugin_bridge.text import Preprocessor

    declared = {option.dest for option in registered_options()}
    unknown = sorted(set(mode_options) - declared)
    if unknown:
        raise TypeError(f"open_mode() got an unexpected keyword argument {unknown[0]!r} (the modes' options: "
                        f"{', '.join(sorted(declared))})")
    client = cluster.client
    meta = read_meta(client, index)
    mode = mode or meta.suggested_mode(cluster.info)
    engine = open_engine(EngineContext(tokens=Preprocessor(meta.text_options()).tokens, options={
        "client": client, "index": index, "fields": (meta.title_field, meta.body_field)}))
    stage = engine.first_stage(first_stage)
    stage.global_statistics = global_statistics
    given = {k: v for k, v in mode_options.items() if v is not None}
    fields = {k: given.pop(k) for k in list(given) if k in ModeOptions.__dataclass_fields__}
    return make_mode(mode, stage, meta, window=window, sidecar=sidecar, cluster=cluster.info,
                     allow_rerank_failures=allow_rerank_failures, extra=given, **fields)


__all__ = ["make_mode", "open_mode", "refuse_without_vectors"]
