"""Where the product looks for a cluster and its questions index when nobody says: defined once, here at
the package's floor, so that every command's ``--help`` and the example files read them without loading
a search client (``esrerank search --help`` imports nothing of ``elastic/``)."""

from __future__ import annotations

#: ``--es-url``'s default (``ESRERANK_ES_URL``) and ``cluster.connection.Connection.url``'s.
DEFAULT_ES_URL = "http://localhost:9200"
#: ``--index``'s default (``ESRERANK_ES_INDEX``): the index ``es setup`` creates and the others search.
DEFAULT_INDEX = "esrerank-questions"
