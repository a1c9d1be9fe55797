"""The scoring core shared by training and serving: fusion (min-max, β), Platt calibration, the
vocabulary and the model-directory format (config schema, manifest).

It imports numpy, pydantic and ``es_plugin_bridge.errors`` only — never ``training``, ``serving``,
``exporters``, torch, gensim or scikit-learn — so the imports go one way: training → core ← serving,
and ``exporters`` writes the format defined here. ``tests/test_core_imports.py`` holds it to that.
"""
