"""The Elasticsearch side of the product: mappings, first stage, the three rerank modes, bulk indexing."""
