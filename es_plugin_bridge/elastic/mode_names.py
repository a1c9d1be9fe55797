"""The Elasticsearch modes' names, in one place every list of them reads (the CLI's choices, the
vector modes, the results index), so no list can fall behind when a mode is added.

Light on purpose: the CLI builds its ``--mode`` choices from it at import time, before any client
or mode class is loaded. (Issue "OpenSearch first-class": a registry of modes, with what each needs
and how it is built, is the next step; this holds only the names.)
"""

from __future__ import annotations

#: Every mode ``es search`` and ``es evaluate`` run, in the order ``--help`` lists them.
MODES = ("native", "vectors", "bridge", "hybrid", "hybrid-rrf")
#: The modes that search the stored vectors (an index without them cannot run these).
VECTOR_MODES = ("vectors", "hybrid", "hybrid-rrf")
#: The modes whose candidates come from the first stage *and* the vectors (elastic/hybrid.py).
HYBRID_MODES = ("hybrid", "hybrid-rrf")
