"""Kibana: the ranking-comparison dashboard's saved objects and the client that imports them."""
