"""The Kibana saved objects of the ranking-comparison dashboard, built from code.

One data view over the per-query results index (``elastic.results_index``), four Lens visualizations
and one dashboard that shows them by reference (``panelRefName``). Kibana has no ranking-comparison
view of its own, so everything is an aggregation over the per-query documents:

* *Aggregates per ranker*: average of each per-query metric (the mean of AP is MAP, the mean of RR
  is MRR, the mean of Success@1 is Acc@1), so the bars equal the figures ``evaluate`` prints;
* *Wins and losses against BM25*: count of documents per ranker and ``outcome_vs_bm25``;
* *Where the rankers disagree*: the queries with the largest ``disagreement`` (spread of the
  primary metric across rankers), one column per ranker;
* *All metrics per ranker*: a table of every metric, for retrieval and classify runs too.

Formats follow Kibana's own sample data (Lens ``formBased`` layers, typeMigrationVersion 8.9.0;
dashboard 8.7.0): Kibana migrates them forward on import. ``check_saved_objects`` proves every
reference resolves and every field exists in ``RESULTS_MAPPING`` with a type its operation accepts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from es_plugin_bridge.elastic.results_index import RESULTS_MAPPING, mapped_fields, results_index_name

DATA_VIEW_ID = "esrerank-results"
DASHBOARD_ID = "esrerank-ranking-comparison"
LAYER = "layer1"
CORE_MIGRATION_VERSION = "8.8.0"
TYPE_MIGRATION_VERSION = {"index-pattern": "8.0.0", "lens": "8.9.0", "dashboard": "8.7.0"}
#: Lens operations on a source field → the field types they accept.
OPERATION_TYPES = {"terms": {"keyword"}, "average": {"float", "integer"}, "max": {"float", "integer"},
                   "min": {"float", "integer"}, "unique_count": {"keyword", "float", "integer"},
                   "date_histogram": {"date"}}
METRIC_LABELS = {"map": "MAP", "mrr": "MRR", "p_at_1": "P@1", "p_at_5": "P@5", "p_at_10": "P@10",
                 "acc_at_1": "Acc@1", "acc_at_5": "Acc@5", "acc_at_10": "Acc@10", "mrr_at_10": "MRR@10",
                 "accuracy": "Accuracy"}


def _terms(field: str, label: str, size: int, order_by: str | None = None, direction: str = "asc",
           ) -> dict[str, Any]:
    order = {"type": "column", "columnId": order_by} if order_by else {"type": "alphabetical",
                                                                       "fallback": False}
    return {"label": label, "customLabel": True, "dataType": "string", "operationType": "terms",
            "scale": "ordinal", "sourceField": field, "isBucketed": True,
            "params": {"size": size, "orderBy": order, "orderDirection": direction, "otherBucket": False,
                       "missingBucket": False, "parentFormat": {"id": "terms"}}}


def _metric(operation: str, field: str, label: str, decimals: int = 2) -> dict[str, Any]:
    return {"label": label, "customLabel": True, "dataType": "number", "operationType": operation,
            "sourceField": field, "isBucketed": False, "scale": "ratio",
            "params": {"emptyAsNull": True, "format": {"id": "number", "params": {"decimals": decimals}}}}


def _count(label: str) -> dict[str, Any]:
    return {"label": label, "customLabel": True, "dataType": "number", "operationType": "count",
            "sourceField": "___records___", "isBucketed": False, "scale": "ratio",
            "params": {"emptyAsNull": True}}


def _lens(object_id: str, title: str, description: str, visualization_type: str,
          visualization: dict[str, Any], columns: dict[str, dict[str, Any]], query: str = "",
          ) -> dict[str, Any]:
    state = {"visualization": visualization, "query": {"query": query, "language": "kuery"}, "filters": [],
             "datasourceStates": {"formBased": {"layers": {LAYER: {
                 "columns": columns, "columnOrder": list(columns), "incompleteColumns": {}}}}},
             "internalReferences": [], "adHocDataViews": {}}
    return {"type": "lens", "id": object_id, "managed": False,
            "coreMigrationVersion": CORE_MIGRATION_VERSION,
            "typeMigrationVersion": TYPE_MIGRATION_VERSION["lens"],
            "attributes": {"title": title, "description": description,
                           "visualizationType": visualization_type, "state": state},
            "references": [{"type": "index-pattern", "id": DATA_VIEW_ID,
                            "name": f"indexpattern-datasource-layer-{LAYER}"}]}


def _xy(series: str, x: str, accessors: Sequence[str], split: str | None = None) -> dict[str, Any]:
    layer: dict[str, Any] = {"layerId": LAYER, "layerType": "data", "seriesType": series, "xAccessor": x,
                             "accessors": list(accessors)}
    if split:
        layer["splitAccessor"] = split
    return {"legend": {"isVisible": True, "position": "right"}, "valueLabels": "show",
            "fittingFunction": "None", "preferredSeriesType": series, "layers": [layer]}


def _datatable(columns: Sequence[str], transposed: Sequence[str] = (), sort: str | None = None,
               ) -> dict[str, Any]:
    vis: dict[str, Any] = {"layerId": LAYER, "layerType": "data",
                           "columns": [{"columnId": c, "isTransposed": c in transposed} for c in columns]}
    if sort:
        vis["sorting"] = {"columnId": sort, "direction": "desc"}
    return vis


def data_view(index: str) -> dict[str, Any]:
    """The data view over the results index; labels make metric names read as in the reports."""
    field_attrs = {f"metrics.{name}": {"customLabel": label} for name, label in METRIC_LABELS.items()}
    field_attrs.update({f"delta_vs_bm25.{name}": {"customLabel": f"Δ {label} vs BM25"}
                        for name, label in METRIC_LABELS.items()})
    return {"type": "index-pattern", "id": DATA_VIEW_ID, "managed": False,
            "coreMigrationVersion": CORE_MIGRATION_VERSION,
            "typeMigrationVersion": TYPE_MIGRATION_VERSION["index-pattern"],
            "attributes": {"title": index, "name": "esrerank per-query results",
                           "timeFieldName": "@timestamp", "fields": "[]",
                           "fieldAttrs": json.dumps(field_attrs, sort_keys=True),
                           "runtimeFieldMap": "{}", "typeMeta": "{}", "sourceFilters": "[]"},
            "references": []}


def lens_objects() -> list[dict[str, Any]]:
    """The four Lens visualizations, each on one layer over the data view."""
    main = {"ranker": _terms("ranker", "ranker", 20),
            "map": _metric("average", "metrics.map", "MAP"),
            "mrr": _metric("average", "metrics.mrr", "MRR"),
            "acc_at_1": _metric("average", "metrics.acc_at_1", "Acc@1"),
            "mrr_at_10": _metric("average", "metrics.mrr_at_10", "MRR@10")}
    outcomes = {"ranker": _terms("ranker", "ranker", 20),
                "outcome": _terms("outcome_vs_bm25", "outcome vs BM25", 3),
                "queries": _count("queries")}
    disagreement = {"query": _terms("query_id", "query", 20, order_by="spread", direction="desc"),
                    "ranker": _terms("ranker", "ranker", 10),
                    "spread": _metric("max", "disagreement", "spread (max − min)"),
                    "score": _metric("average", "score", "primary metric"),
                    "first": _metric("min", "rank_first_relevant", "rank of first relevant", decimals=0)}
    table = {"ranker": _terms("ranker", "ranker", 20),
             "queries": _metric("unique_count", "query_id", "queries", 0)}
    table.update({name: _metric("average", f"metrics.{name}", label)
                  for name, label in METRIC_LABELS.items()})
    return [
        _lens("esrerank-aggregates", "Aggregates per ranker",
              "Mean of the per-query metrics: MAP/MRR for rerank runs, Acc@1/MRR@10 for retrieval runs.",
              "lnsXY", _xy("bar", "ranker", ["map", "mrr", "acc_at_1", "mrr_at_10"]), main),
        _lens("esrerank-wins-losses", "Per-query wins and losses against BM25",
              "Queries on which each ranker's primary metric (MAP, Acc@1 or accuracy) beats, ties or "
              "loses to BM25's on the same query.",
              "lnsXY", _xy("bar_horizontal_stacked", "ranker", ["queries"], split="outcome"), outcomes,
              query="outcome_vs_bm25:*"),
        _lens("esrerank-disagreement", "Queries where the rankers disagree most",
              "The 20 queries with the largest spread of the primary metric across rankers; one column "
              "per ranker.",
              "lnsDatatable", _datatable(list(disagreement), transposed=["ranker"], sort="spread"),
              disagreement),
        _lens("esrerank-metrics-table", "All metrics per ranker",
              "Every per-query metric averaged per ranker (empty columns belong to other tasks).",
              "lnsDatatable", _datatable(list(table)), table),
    ]


_MARKDOWN = (
    "**Ranking comparison** over the per-query results that `esrerank es evaluate` writes.\n\n"
    "Pick one **run** (and task) in the controls above: averages mix runs otherwise. Wins, losses and "
    "disagreement use the task's primary metric (MAP for rerank, Acc@1 for retrieval, accuracy for "
    "classify); `esrerank evaluate --report DIR` writes the same comparison as HTML and PNG."
)


def dashboard(lenses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The dashboard: a note, then the four Lens panels by reference, run and task controls on top."""
    layout = {"esrerank-aggregates": (0, 6, 24, 14), "esrerank-wins-losses": (24, 6, 24, 14),
              "esrerank-disagreement": (0, 20, 30, 22), "esrerank-metrics-table": (30, 20, 18, 22)}
    panels: list[dict[str, Any]] = [{
        "type": "visualization", "panelIndex": "note",
        "gridData": {"x": 0, "y": 0, "w": 48, "h": 6, "i": "note"},
        "embeddableConfig": {"savedVis": {
            "title": "", "description": "", "type": "markdown", "uiState": {},
            "params": {"fontSize": 12, "openLinksInNewTab": False, "markdown": _MARKDOWN},
            "data": {"aggs": [],
                     "searchSource": {"query": {"query": "", "language": "kuery"}, "filter": []}}},
            "hidePanelTitles": True, "enhancements": {}}}]
    references = []
    for lens in lenses:
        index = lens["id"]
        x, y, w, h = layout[index]
        panels.append({"type": "lens", "panelIndex": index,
                       "gridData": {"x": x, "y": y, "w": w, "h": h, "i": index},
                       "embeddableConfig": {"enhancements": {}}, "panelRefName": f"panel_{index}"})
        references.append({"type": "lens", "id": index, "name": f"{index}:panel_{index}"})
    controls = {}
    for order, (field, title) in enumerate((("run_id", "Run"), ("task", "Task"), ("dataset", "Data set"))):
        control_id = f"control-{field}"
        controls[control_id] = {"order": order, "width": "medium" if field == "run_id" else "small",
                                "grow": field == "run_id", "type": "optionsListControl",
                                "explicitInput": {"id": control_id, "fieldName": field, "title": title,
                                                  "singleSelect": field != "dataset", "enhancements": {}}}
        references.append({"type": "index-pattern", "id": DATA_VIEW_ID,
                           "name": f"controlGroup_{control_id}:optionsListDataView"})
    return {"type": "dashboard", "id": DASHBOARD_ID, "managed": False,
            "coreMigrationVersion": CORE_MIGRATION_VERSION,
            "typeMigrationVersion": TYPE_MIGRATION_VERSION["dashboard"],
            "attributes": {
                "title": "esrerank: ranking comparison",
                "description": "MAP/MRR (or Acc@k) per ranker, per-query wins and losses against BM25, "
                               "and the queries where the rankers disagree most.",
                "panelsJSON": json.dumps(panels, ensure_ascii=False),
                "optionsJSON": json.dumps({"useMargins": True, "syncColors": True, "syncCursor": True,
                                           "syncTooltips": False, "hidePanelTitles": False}),
                "timeRestore": True, "timeFrom": "now-1y", "timeTo": "now",
                "refreshInterval": {"pause": True, "value": 60000},
                "controlGroupInput": {
                    "controlStyle": "oneLine", "chainingSystem": "HIERARCHICAL", "showApplySelections": False,
                    "panelsJSON": json.dumps(controls),
                    "ignoreParentSettingsJSON": json.dumps({"ignoreFilters": False, "ignoreQuery": False,
                                                            "ignoreTimerange": False,
                                                            "ignoreValidations": False})},
                "kibanaSavedObjectMeta": {"searchSourceJSON": json.dumps(
                    {"query": {"query": "", "language": "kuery"}, "filter": []})}},
            "references": references}


def saved_objects(index: str | None = None) -> list[dict[str, Any]]:
    """Data view, Lens objects, dashboard — in the order Kibana's import resolves them."""
    lenses = lens_objects()
    return [data_view(results_index_name(index)), *lenses, dashboard(lenses)]


def to_ndjson(objects: Iterable[Mapping[str, Any]]) -> str:
    """One JSON object per line (the saved-objects import format), keys sorted for stable diffs."""
    return "".join(json.dumps(o, sort_keys=True, ensure_ascii=False) + "\n" for o in objects)


def parse_ndjson(text: str) -> list[dict[str, Any]]:
    """The objects of an NDJSON export (blank lines and the export summary line skipped)."""
    objects = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number}: not JSON ({exc.msg})") from None
        if "exportedCount" in obj and "type" not in obj:
            continue
        objects.append(obj)
    return objects


def check_saved_objects(objects: Sequence[Mapping[str, Any]],
                        mapping: Mapping[str, Any] = RESULTS_MAPPING) -> list[str]:
    """Problems that would make an object fail to import or render: ``[]`` when all is consistent.

    Every reference must name an object of the set (or a data view), every panel's ``panelRefName``
    must have its reference, every Lens layer its data view reference, and every Lens column and
    control a field of the results mapping whose type the operation accepts.
    """
    fields = mapped_fields(mapping)
    known = {(o["type"], o["id"]) for o in objects}
    problems: list[str] = []
    for obj in objects:
        where = f"{obj['type']} {obj['id']}"
        refs = {r["name"]: r for r in obj.get("references", [])}
        for ref in obj.get("references", []):
            if (ref["type"], ref["id"]) not in known:
                problems.append(f"{where}: reference {ref['name']} to missing {ref['type']} {ref['id']}")
        if obj["type"] == "index-pattern":
            for name in json.loads(obj["attributes"].get("fieldAttrs", "{}")):
                if name not in fields:
                    problems.append(f"{where}: fieldAttrs names unmapped field {name}")
        elif obj["type"] == "lens":
            problems += _check_lens(where, obj, refs, fields)
        elif obj["type"] == "dashboard":
            for panel in json.loads(obj["attributes"]["panelsJSON"]):
                ref_name = panel.get("panelRefName")
                if ref_name and f"{panel['panelIndex']}:{ref_name}" not in refs:
                    problems.append(f"{where}: panel {panel['panelIndex']} has no reference {ref_name}")
                if panel.get("gridData", {}).get("i") != panel.get("panelIndex"):
                    problems.append(f"{where}: panel {panel['panelIndex']} gridData.i differs")
            controls = json.loads(obj["attributes"].get("controlGroupInput", {}).get("panelsJSON", "{}"))
            for control_id, control in controls.items():
                field = control["explicitInput"]["fieldName"]
                if fields.get(field) != "keyword":
                    problems.append(f"{where}: control {control_id} on {field}, not a keyword field")
                if f"controlGroup_{control_id}:optionsListDataView" not in refs:
                    problems.append(f"{where}: control {control_id} has no data view reference")
    return problems


def _check_lens(where: str, obj: Mapping[str, Any], refs: Mapping[str, Any],
                fields: Mapping[str, str]) -> list[str]:
    problems = []
    state = obj["attributes"]["state"]
    layers = state["datasourceStates"]["formBased"]["layers"]
    for layer_id, layer in layers.items():
        if f"indexpattern-datasource-layer-{layer_id}" not in refs:
            problems.append(f"{where}: layer {layer_id} has no data view reference")
        columns = layer["columns"]
        if sorted(columns) != sorted(layer["columnOrder"]):
            problems.append(f"{where}: columnOrder names other columns than the layer has")
        for column_id, column in columns.items():
            source = column.get("sourceField")
            operation = column["operationType"]
            if operation == "count":
                continue
            if source not in fields:
                problems.append(f"{where}: column {column_id} reads unmapped field {source}")
            elif fields[source] not in OPERATION_TYPES.get(operation, set()):
                problems.append(f"{where}: column {column_id}: {operation} on {fields[source]} "
                                f"field {source}")
            order = column.get("params", {}).get("orderBy", {})
            if order.get("type") == "column" and order.get("columnId") not in columns:
                problems.append(f"{where}: column {column_id} is ordered by missing column "
                                f"{order['columnId']}")
    vis = state["visualization"]
    accessors = set()
    for layer in vis.get("layers", [vis]):
        accessors |= {layer.get("xAccessor"), layer.get("splitAccessor"), *layer.get("accessors", [])}
        accessors |= {c["columnId"] for c in layer.get("columns", [])}
        if layer.get("layerId") not in layers:
            problems.append(f"{where}: visualization layer {layer.get('layerId')} has no datasource layer")
    all_columns = {c for layer in layers.values() for c in layer["columns"]}
    for accessor in accessors - {None}:
        if accessor not in all_columns:
            problems.append(f"{where}: visualization uses missing column {accessor}")
    return problems
