"""Rankers ``jaccard`` and ``svm``: the non-neural baselines of Bogdanova et al. (2015).

``jaccard`` needs no training (``--param jaccard.n=2`` for bigram shingles); ``svm`` loads a fitted
SVM (svm.json + svm.safetensors, from ``python -m es_plugin_bridge.baselines.measure --save-svm DIR``)
from ``--model``. Neither searches a whole collection (pairwise scoring in Python would take minutes
per query over 36,000 titles), so their tasks are rerank and classify.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.baselines import JaccardScorer, SvmScorer
from es_plugin_bridge.data.types import Pair, Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.rankers import register
from es_plugin_bridge.rankers.base import Ranker, RankerContext


class _PairScorerRanker(Ranker):
    scorer: JaccardScorer | SvmScorer

    def score(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        tokens = self.context.tokens
        return self.scorer.rank_scores(tokens(query), [tokens(c) for c in candidates])

    def score_pairs(self, pairs: Sequence[Pair]) -> np.ndarray:
        tokens = self.context.tokens
        return self.scorer.score([(tokens(p.q1), tokens(p.q2)) for p in pairs])


@register("jaccard", tasks=("rerank", "classify"), description="Jaccard of word shingles (Bogdanova et al.)")
class JaccardRanker(_PairScorerRanker):
    name = "jaccard"

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        self.scorer = JaccardScorer(int(context.params.get("jaccard", {}).get("n", 1)))


@register("svm", tasks=("rerank", "classify"), needs_model=True,
          description="RBF SVM over n-gram and Jaccard features (Bogdanova et al.); --model holds svm.json")
class SvmRanker(_PairScorerRanker):
    name = "svm"

    def __init__(self, context: RankerContext) -> None:
        super().__init__(context)
        assert context.model_dir is not None
        if not (context.model_dir / "svm.json").is_file():
            raise UserError(f"ranker 'svm': {context.model_dir} holds no svm.json "
                            "(write one with python -m es_plugin_bridge.baselines.measure --save-svm DIR)")
        self.scorer = SvmScorer.load(context.model_dir)
