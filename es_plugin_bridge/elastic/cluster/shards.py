"""How every search of the product stays exact on an index of many shards (docs/scaling-out.md).

Three rules of the engine, read in OpenSearch 2.19's source (Elasticsearch's is the same code):

- **Statistics are per shard** unless a search asks for global ones. A shard scores BM25, LM-Dirichlet
  and the other similarities with its own document frequencies and lengths; ``search_type=
  dfs_query_then_fetch`` first gathers every shard's term and field statistics (``search/dfs/
  DfsPhase.java``) and scores with their sums (``search/internal/ContextIndexSearcher.java``:
  ``termStatistics``/``collectionStatistics`` read the aggregated ``AggregatedDfs``). On a single shard
  the engine drops the extra phase itself: ``action/search/TransportSearchAction.java`` turns a search
  of one shard group into ``QUERY_THEN_FETCH`` ("no need for DFS"), so asking costs nothing there.
- **A ``rescore`` window is per shard**: ``search/rescore/QueryRescorer.java`` rescores each shard's own
  top ``window_size``; the coordinator then merges. So the modes that rescore
  (``vectors`` on any licence, ``hybrid``'s second step) restrict the rescored search to the ids of the
  global first-stage window they already read; each shard then holds at most ``window`` of them, all
  rescored, and no other document can be.
- **``preference`` pins copies, never a dead one**: a custom string is hashed to pick one copy of each
  shard among the *active* ones (``cluster/routing/OperationRouting.java``,
  ``preferenceActiveShardIterator`` → ``IndexShardRoutingTable.activeInitializingShardsIt``); the
  iterator holds every active copy, and ``action/search/AbstractSearchAsyncAction.java``
  (``onShardFailure``) moves to the next one when a copy fails within a phase, so a dead node's copy is
  not pinned. (Between the DFS, query and fetch phases the engine has no retry: partial results are
  refused, ``whole_answers.WHOLE``, so such a search fails rather than answering without a shard,
  and ``lost_copy.py`` sends it again while the error says a copy was lost.)

What is global already: a k-NN query's ``k`` is per shard and the coordinator keeps the global top
``size`` of their union (exact ``script_score`` and HNSW alike); a search response processor
(OpenSearch's ``rerank``) sees the merged page; the bridge's window is the merged top ``window``.
"""

from __future__ import annotations

from dataclasses import dataclass

from es_plugin_bridge.errors import UserError

#: The search type that scores with every shard's statistics summed (one more round-trip per search).
GLOBAL_STATISTICS = "dfs_query_then_fetch"


def search_type(global_statistics: bool) -> dict[str, str]:
    """The keyword that asks a search (or an ``_msearch``) for global statistics, or nothing."""
    return {"search_type": GLOBAL_STATISTICS} if global_statistics else {}



@dataclass(frozen=True)
class IndexLayout:
    """``es setup --shards N --replicas R`` (and ``es evaluate --shards N``): how a new questions index is
    split. One shard by default: a corpus of up to some millions of questions fits one shard of the
    10–50 GB the engines advise, and one shard needs no global statistics; ``replicas`` None keeps the
    cluster's default (1)."""

    shards: int = 1
    replicas: int | None = None

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise UserError(f"--shards must be at least 1, got {self.shards}")
        if self.replicas is not None and self.replicas < 0:
            raise UserError(f"--replicas must be at least 0, got {self.replicas}")

    def body_options(self) -> dict[str, int | None]:
        """``mappings.index_body``'s keywords for this layout."""
        return {"shards": self.shards, "replicas": self.replicas}

    def describe(self) -> str:
        """``3 shards, 1 replica`` for the line that says what was created."""
        shards = f"{self.shards} shard{'s' if self.shards != 1 else ''}"
        if self.replicas is None:
            return shards
        return f"{shards}, {self.replicas} replica{'s' if self.replicas != 1 else ''}"


#: The default layout: one shard, the cluster's replicas.
ONE_SHARD = IndexLayout()
