"""A real OpenSearch node for tests and local trials, assembled from Maven Central (no Docker).

``layout`` lays out the home with ``mvn``; ``node`` starts and stops a single node on 127.0.0.1;
``python -m es_plugin_bridge.opensearch_node`` is the command ``make opensearch`` runs. Development
only: nothing in the product imports it, and it needs Java 17 and Maven, not any Python dependency.
"""
