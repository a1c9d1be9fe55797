"""The cluster the product talks to, whichever engine it is: the connection and its one ``GET /``
(``connection``: ``Connection``, ``ClusterInfo``, the one-line errors), the one module that decides
Elasticsearch or OpenSearch (``dialect``), OpenSearch's client behind the same calls
(``opensearch_client``), a search sent again when a node left mid-search (``lost_copy``), and exact
statistics on any number of shards (``shards``).
"""
