"""Write the golden answers of an exported model directory: every score ``ModelDirectory.rerank`` gives
and every ``/v1/rerank`` and ``/v1/encode`` answer, on real AskUbuntu questions, as exact JSON floats.

Run it with the code whose answers are the reference on the path (an older checkout)::

    PYTHONPATH=OLD_CHECKOUT python tests/tools/golden_scores.py MODEL_DIR OUT.json

``tests/serving/test_old_exports_score_identically.py`` recomputes the same answers with today's code and
asks for equality, float for float.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.model_dir import ModelDirectory

VAL = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"


def answers(model_dir: Path) -> dict[str, Any]:
    """The scores and HTTP answers compared: 3 queries of 30 candidates each, every component."""
    pairs = read_spec(f"pairs:{VAL}").pairs
    questions = list({q.id: q for p in pairs for q in (p.q1, p.q2)}.values())[:93]
    model = ModelDirectory.load(model_dir, threads=1)
    stage = next(iter(model.fusion))
    scores = []
    for i in range(3):
        query, docs = questions[i * 31], questions[i * 31 + 1 : i * 31 + 31]
        first_stage = [float(len(d.title)) for d in docs]
        parts = model.rerank(query, docs, first_stage, stage)
        scores.append({name: [float(x) for x in values] for name, values in parts.items()})
    client = create_app(model).test_client()
    http = []
    for i in range(3):
        docs = questions[i * 31 + 1 : i * 31 + 31]
        body = {"query": questions[i * 31].title, "first_stage_scores": [float(j) for j in range(30)],
                "documents": [{"title": d.title, "body": d.body} for d in docs]}
        http.append(client.post("/v1/rerank", json={**body, "explain": True}).get_json())
        http.append(client.post("/v1/rerank?score=linear",
                                json={k: v for k, v in body.items() if k != "first_stage_scores"}).get_json())
    http.append(client.post("/v1/encode", json={"texts": [q.title for q in questions[:10]]}).get_json())
    for answer in http:
        answer.pop("took_ms", None)
    return {"scores": scores, "http": http}


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(answers(Path(sys.argv[1])), indent=1) + "\n", encoding="utf-8")
