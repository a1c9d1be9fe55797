"""The review page's data: one run's results as a JSON-able bundle, and several bundles joined.

Why a bundle of its own: the contract JSON holds aggregates only and the per-query JSONL holds ids only;
a reviewer needs each query's text, every ranker's list, the known duplicates and the inputs' hashes to
tell whether two runs may be paired at all. ``evaluate --report DIR`` writes it as ``DIR/review.json``
and ``esrerank report`` joins several of them. Runs whose query sets or judgments differ are refused
(one line on the page), never paired: a per-query difference between different queries means nothing.
Runs of different models (their manifests' hashes differ) are paired, and the page says so in one line:
comparing two models on the same queries and judgments is what a reviewer deciding between them needs,
so the difference is named, not refused. An ``es evaluate`` run's mode carries its engine parity (the
in-process ranker's lists against the engine's, ``elastic/parity.py``) and its requests per search.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.results import TaskResult
from es_plugin_bridge.evaluation.significance import MAIN_METRIC, first_stage_of, paired, paired_test

BUNDLE_NAME = "review.json"
BOOTSTRAP = 2000
FORMAT = 1
#: The ``--explain`` fields the page shows per candidate (fused = Σ β · component).
EXPLAINED = ("first_stage", "first_stage_norm", "bow", "neural", "fused", "beta_first_stage", "beta_bow",
             "beta_neural")


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def bootstrap_ci(values: Sequence[float], *, resamples: int = BOOTSTRAP, seed: int = 0) -> list[float]:
    """95 % percentile-bootstrap interval of the mean over queries (seeded, so a page is reproducible)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return [0.0, 0.0]
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    return [round(float(np.percentile(means, 2.5)), 2), round(float(np.percentile(means, 97.5)), 2)]


def latency_percentiles(latencies: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of the per-query wall time in ms, where the run timed each query."""
    if not latencies:
        return {}
    ms = 1000 * np.asarray(latencies, dtype=np.float64)
    return {f"p{q}_ms": round(float(np.percentile(ms, q)), 3) for q in (50, 95)}


def signature(result: TaskResult) -> dict[str, str]:
    """Hashes of the query set (ids and texts) and of the judgments, plus the model manifest's hash, the
    β of the explained fused ranker (where the run has --explain) and the command."""
    ids = sorted(result.judgments)
    first = result.explain[0] if result.explain else {}
    beta = {k[5:]: v for k, v in first.items() if k.startswith("beta_")}
    return {"queries": _sha([[q, result.texts.get(q, "")] for q in ids]),
            "judgments": _sha({q: result.judgments[q]["relevant"] for q in ids}),
            **{k: v for k, v in result.inputs.items() if k in ("model", "command")},
            **({"beta": json.dumps(beta, sort_keys=True)} if beta else {})}


def bundle(result: TaskResult, label: str = "run") -> dict[str, Any]:
    """Everything the page shows about one run (see the module docstring)."""
    if not result.rankers:
        raise UserError("review page: the run has no ranker")
    metric = MAIN_METRIC[result.task]
    base = first_stage_of(result)
    aggregates = result.as_json()["rankers"]
    rankers: dict[str, Any] = {}
    for name, r in result.rankers.items():
        test = paired(result, name, base) if base is not None and name != base else None
        rankers[name] = {"metrics": aggregates[name], "seconds": round(r.seconds, 3),
                         "ms_per_query": round(1000 * r.seconds / max(result.n_queries, 1), 3),
                         **latency_percentiles(r.latencies),
                         "ci": {m: bootstrap_ci([rec["metrics"][m] for rec in r.per_query])
                                for m in result.metric_names if m != "threshold" and r.per_query},
                         "p_vs_baseline": None if test is None else test["p_value"],
                         **({"computed_by": result.computed_by[name]} if name in result.computed_by else {}),
                         **({"parity": result.parity[name]} if name in result.parity else {}),
                         **({"requests_per_search": result.cost[name]["requests_per_search"]}
                            if "requests_per_search" in result.cost.get(name, {}) else {})}
    records = {name: {str(x["query_id"]): x for x in r.per_query} for name, r in result.rankers.items()}
    queries = []
    for qid, judged in result.judgments.items():
        by = {}
        for name in result.rankers:
            rec = records[name].get(qid)
            if rec is not None:
                by[name] = {"ranking": _listed(rec), "rank": rec.get("rank_first_relevant"),
                            "value": rec["metrics"][metric]}
        queries.append({"id": qid, "text": result.texts.get(qid, ""), **judged, "by": by})
    explain: dict[str, dict[str, Any]] = {}
    for rec in result.explain:
        explain.setdefault(rec["query_id"], {})[rec["candidate_id"]] = {
            k: rec[k] for k in EXPLAINED if k in rec}
    return {"format": FORMAT, "label": label, "task": result.task, "metric": metric, "baseline": base,
            "n_queries": result.n_queries, "metric_names": list(result.metric_names),
            "signature": signature(result), "rankers": rankers, "queries": queries, "texts": result.texts,
            "explain": explain, "notes": list(result.notes),
            "ci_method": f"95% percentile bootstrap over queries ({BOOTSTRAP} resamples, seed 0)",
            "p_method": "paired Fisher randomization test, two-sided, on per-query " + metric}


def _listed(record: Mapping[str, Any]) -> list[str]:
    """A per-query record's top 10: rerank's ``ranking``, retrieval's ``top_ids``, classify's one q2."""
    listed = record.get("ranking") or record.get("top_ids") or [record.get("q2_id")]
    return [str(i) for i in listed if i is not None][:10]


def read_bundle(path: Path) -> dict[str, Any]:
    """A bundle from ``DIR`` (its ``review.json``) or from the JSON file itself; one-line errors."""
    path = Path(path)
    file = path / BUNDLE_NAME if path.is_dir() else path
    if not file.is_file():
        raise UserError(f"{path}: no {BUNDLE_NAME} here (write one with esrerank evaluate --report DIR)")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{file}: not a review bundle ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or "queries" not in data:
        raise UserError(f"{file}: not a review bundle (written by esrerank evaluate --report)")
    return data


def join(bundles: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One page's data from several runs: the first run's queries, each later run's rankers added as
    ``ranker [label]``; a run whose task, query set or judgments differ is refused with one line."""
    if not bundles:
        raise UserError("report: give at least one run")
    first = bundles[0]
    joined: dict[str, Any] = json.loads(json.dumps(first))
    joined["runs"] = [{"label": first["label"], "signature": first["signature"]}]
    joined["refusals"] = []
    joined["notices"] = []
    if len(bundles) == 1:
        return joined
    rename = {name: f"{name} [{first['label']}]" for name in first["rankers"]}
    _rename(joined, rename)
    by_id = {q["id"]: q for q in joined["queries"]}
    for other in bundles[1:]:
        joined["runs"].append({"label": other["label"], "signature": other["signature"]})
        why = [k for k in ("queries", "judgments") if other["signature"].get(k) != first["signature"].get(k)]
        if other["task"] != first["task"]:
            why.insert(0, "task")
        if why:
            joined["refusals"].append(f"{other['label']} is not paired with {first['label']}: its "
                                      f"{' and '.join(why)} differ")
            continue
        if other["signature"].get("model") != first["signature"].get("model"):
            joined["notices"].append(f"{other['label']} and {first['label']} ran different models (manifest "
                                     f"{_short(other['signature'].get('model'))} against "
                                     f"{_short(first['signature'].get('model'))}): their differences "
                                     "include the model's")
        names = {name: f"{name} [{other['label']}]" for name in other["rankers"]}
        for name, value in other["rankers"].items():
            joined["rankers"][names[name]] = {**value, "p_vs_baseline": None}
        for q in other["queries"]:
            by_id[q["id"]]["by"].update({names[n]: v for n, v in q["by"].items()})
        joined["texts"].update(other["texts"])
    _paired_p(joined)
    return joined


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "none"


def _rename(data: dict[str, Any], names: Mapping[str, str]) -> None:
    data["rankers"] = {names[n]: v for n, v in data["rankers"].items()}
    data["baseline"] = names.get(data["baseline"]) if data["baseline"] else None
    for q in data["queries"]:
        q["by"] = {names[n]: v for n, v in q["by"].items()}


def _paired_p(data: dict[str, Any]) -> None:
    """Each joined ranker's p against the first run's baseline, recomputed on the shared queries."""
    base = data["baseline"]
    if base is None:
        return
    for name, value in data["rankers"].items():
        if name == base:
            continue
        pairs = [(q["by"][name]["value"], q["by"][base]["value"]) for q in data["queries"]
                 if name in q["by"] and base in q["by"]]
        value["p_vs_baseline"] = paired_test([a for a, _ in pairs], [b for _, b in pairs])["p_value"]
