"""The collection ``esrerank search`` searches: a server's existing index (it keeps its own preprocessing),
or data files indexed in process by a local engine. The user's mistake (files for a server, none for a
local engine) is told in one line naming the engines that fit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.engines.base import Engine
from es_plugin_bridge.engines.registry import EngineContext, build_engine, engine_info, engine_names
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text import Preprocessor


def open_searchable(engine: str, corpus_specs: Sequence[str], index: str,
                    connection: Any = None) -> tuple[Engine, str]:
    """``(engine, what it holds)``: the index ``index`` through ``connection`` for a remote engine, else
    the questions of ``corpus_specs`` (distinct by id) indexed by ``engine`` in process."""
    remote = {name: engine_info(name).remote for name in engine_names()}
    if remote[engine]:
        if corpus_specs:
            local = " or ".join(name for name, far in remote.items() if not far)
            raise UserError(f"--corpus is for the {local} engine; --engine {engine} searches --index")
        options = {"connection": connection, "index": index}
        return build_engine(engine, EngineContext(options=options)), f"index {index}"
    if not corpus_specs:
        others = " or ".join(name for name, far in remote.items() if far)
        raise UserError("give the questions to search with --corpus SPEC"
                        + (f" (or --engine {others})" if others else ""))
    collection = {q.id: q for spec in corpus_specs for q in read_spec(spec).questions.values()}
    built = build_engine(engine, EngineContext(tokens=Preprocessor().tokens))
    built.index(list(collection.values()))
    return built, f"{len(collection):,} questions"
