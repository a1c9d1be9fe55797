"""Evaluation of the three tasks (rerank, retrieval, classify) and their reports."""

from es_plugin_bridge.evaluation.classify import accuracy_at, best_threshold, classify, evaluate_classify
from es_plugin_bridge.evaluation.rerank import evaluate_rerank
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult, percent
from es_plugin_bridge.evaluation.retrieval import (
    RetrievalQuery,
    duplicate_queries,
    evaluate_retrieval,
    held_out,
)

__all__ = ["RankerResult", "RetrievalQuery", "TaskResult", "accuracy_at", "best_threshold", "classify",
           "duplicate_queries", "evaluate_classify", "evaluate_rerank", "evaluate_retrieval", "held_out",
           "percent"]
