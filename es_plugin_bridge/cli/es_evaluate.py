"""``esrerank es evaluate``: ``esrerank evaluate`` (same tasks, options and JSON) run through Elasticsearch.

The run's collection goes into a throw-away index (so collection statistics are the run's own, as in
process); every first-stage ranker searches it; ``--mode`` gives its registry entry's ranker (``fused``,
``hybrid``, ``hybrid-rrf`` or ``model``) and any other model ranker asked for runs in process, labelled so
(``EsEvaluationRun``, ``computed_by``); each of the mode's searches is then asked of that ranker in
process and the two lists compared (``parity``; ``--no-parity``: not), and the mode's latency and requests
per search kept (``cost``); per-query results also go to the results index that the Kibana dashboards
read (``--results-index``, default ``esrerank-runs``). Whatever ends the run (its end, an
error, Ctrl-C, SIGTERM), the throw-away index and what the mode registered are removed, or named with
the request that removes them (``elastic/run_cleanup.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from es_plugin_bridge.cli.es_options import pop_connection, sidecar_click_options, sidecar_target
from es_plugin_bridge.cli.evaluate import evaluate
from es_plugin_bridge.cli.interrupts import signals_interrupt
from es_plugin_bridge.cli.mode_options import ModeChoice
from es_plugin_bridge.elastic.modes import mode_names, mode_spec
from es_plugin_bridge.elastic.modes.hybrid import KNN_OPTION

EXTRA = [
    click.Option(
        ["--mode"],
        type=ModeChoice(),
        default="bridge",
        show_default=True,
        help="The mode the cluster searches with; it gives one ranker (see above).",
    ),
    click.Option(
        ["--knn"],
        type=click.Choice(list(KNN_OPTION.choices)),  # mode hybrid's own option (modes/hybrid.py)
        default="exact",
        show_default=True,
        help="Modes hybrid, hybrid-rrf: exact script_score (the in-process order) or approximate HNSW knn.",
    ),
    click.Option(
        ["--window"],
        type=click.IntRange(min=1),
        default=100,
        show_default=True,
        help="retrieval: first-stage hits that fused reranks (rerank: all candidates).",
    ),
    click.Option(
        ["--sidecar-from-es"],
        envvar="ESRERANK_SIDECAR_FROM_ES",
        default=None,
        help="The sidecar as Elasticsearch reaches it (mode native); default: --sidecar.",
    ),
    *sidecar_click_options(),
    click.Option(
        ["--results-index"],
        envvar="ESRERANK_RESULTS_INDEX",
        default="esrerank-runs",
        show_default=True,
        help="Index of per-query results for Kibana [env ESRERANK_RESULTS_INDEX].",
    ),
    click.Option(
        ["--no-results-index"], is_flag=True, help="Do not write per-query results to Elasticsearch."
    ),
    click.Option(
        ["--dataset"], default=None, help="Data set name in the results index (default: from the spec)."
    ),
    click.Option(["--keep-index"], is_flag=True, help="Keep the run's questions index (esrerank-eval-...)."),
    click.Option(["--no-parity"], is_flag=True,
                 help="Do not ask the mode's in-process ranker each search again afterwards (the engine "
                 "parity check: the JSON's parity, the report's badge)."),
    click.Option(["--shards"], type=click.IntRange(min=1), default=1, show_default=True,
                 help="Primary shards of the run's index (every search uses global statistics: the figures "
                 "do not depend on it)."),
]


def _setup(options: dict[str, Any], conn: Any, first_stage: str | None) -> Any:
    """The hook ``evaluate`` calls: the library's :class:`EsEvaluationRun` for these options."""
    from es_plugin_bridge.elastic.evaluation_run import EsEvaluationRun

    return EsEvaluationRun(
        connection=conn, mode=options["mode"], window=options["window"],
        sidecar=sidecar_target(options["sidecar_url"], options["token"], options["timeout"],
                               options["sidecar_ca_certs"]),
        first_stage=first_stage or "bm25", sidecar_from_es=options["sidecar_from_es"], knn=options["knn"],
        keep_index=options["keep_index"], shards=options["shards"], parity=not options["no_parity"],
        results_index=None if options["no_results_index"] else options["results_index"],
        dataset=options["dataset"])


def _dataset(kwargs: dict[str, Any]) -> str:
    """The results index's data set name by default: the --data (or --queries) file's name."""
    spec = kwargs.get("data_spec") or kwargs.get("queries_spec") or "data"
    return Path(str(spec).partition(":")[2] or str(spec)).name


def _callback(**kwargs: Any) -> None:
    options = {opt.name: kwargs.pop(opt.name) for opt in EXTRA}
    options["dataset"] = options["dataset"] or _dataset(kwargs)  # the spec is evaluate's own option
    keys = ("es_url", "es_api_key", "es_username", "es_password", "es_ca_certs", "es_timeout")
    connection = {key: kwargs[key] for key in keys}
    conn = pop_connection(dict(connection))
    setup = _setup(options, conn, kwargs.get("fused_first_stage"))
    # SIGTERM as Ctrl-C: the run's index and registrations are removed on the way out (run_cleanup).
    with signals_interrupt():
        evaluate.callback(**kwargs, engine="elasticsearch", setup=setup)  # type: ignore[misc]


def _help() -> str:
    """``--help``'s text, with the ranker each mode gives read from the mode registry."""
    gives: dict[str, list[str]] = {}
    for name in mode_names():
        gives.setdefault(mode_spec(name).ranker, []).append(name)
    table = "; ".join(f"{', '.join(modes)}: {ranker}" for ranker, modes in gives.items())
    return ("The same tasks, options and JSON as `esrerank evaluate`, run through the cluster: the first "
            f"stages search the run's index and --mode gives one ranker ({table}). Any other ranker asked "
            "for (model, fused under --mode hybrid...) is computed in process, and the table and the JSON "
            "(computed_by) say so. Needs --model DIR (the directory the sidecar serves).")


es_evaluate = click.Command(
    "evaluate",
    params=[p for p in evaluate.params if p.name != "engine"] + EXTRA,
    callback=_callback,
    help=_help(),
)
