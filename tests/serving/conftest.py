"""What the sidecar tests share: the real SemEval-2016 dev questions and the JSON a question is sent as."""

from __future__ import annotations

from pathlib import Path

import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import RankingQuery

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"


@pytest.fixture(scope="session")
def semeval_dev() -> list[RankingQuery]:
    """The 50 SemEval-2016 dev queries with their candidates and the search engine's scores."""
    return read_spec(f"semeval:{SEMEVAL_DEV}").queries
