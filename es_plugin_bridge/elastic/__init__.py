"""The Elasticsearch and OpenSearch side of the product: mappings, first stage, the search modes
(``modes/``, one module each; the registry lists them), bulk indexing."""
