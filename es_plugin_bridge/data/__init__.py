"""Readers for every SPEC format of the CLI contract, and the data shapes they produce."""

from es_plugin_bridge.data.types import Dataset, Pair, Question, RankingQuery

__all__ = ["Dataset", "Pair", "Question", "RankingQuery"]
