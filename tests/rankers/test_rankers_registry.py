"""The ranker registry's discovery: a ranker module that cannot be imported (an optional library missing)
does not keep the modules after it from registering their rankers."""

from __future__ import annotations

import json
import subprocess
import sys

WITHOUT_SKLEARN = """
import importlib.abc, json, sys

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "sklearn":
            raise ImportError("scikit-learn is not installed here")

sys.meta_path.insert(0, Blocker())
from es_plugin_bridge import rankers

try:
    rankers.available()
    first = None
except ImportError as exc:
    first = str(exc)
print(json.dumps({"first": first, "names": rankers.available()}))
"""


def test_a_module_that_fails_to_import_does_not_hide_the_later_rankers():
    # rankers/baselines.py (jaccard, svm) needs scikit-learn and is the first module in name order.
    out = subprocess.run([sys.executable, "-c", WITHOUT_SKLEARN], capture_output=True, text=True,
                         timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["first"] == "scikit-learn is not installed here"  # the failure is still reported, once
    assert {"bm25", "lmdirichlet", "tfidf", "given"} <= set(got["names"])
    assert not {"jaccard", "svm"} & set(got["names"])
