"""Why the AskUbuntu retrieval targets are hard: the protocol's ceiling, BM25, and a dual encoder.

The papers' AskUbuntu retrieval task ranks every distinct title of ``train_titles.tsv`` (36,346) for a
query title; the one relevant document is its duplicate in a held-out pair (``esrerank split``, seed 1).
Reported Acc@1 figures are easier to judge against three facts this script measures on dev and test,
each in both directions ("as specified": query = q1, relevant = q2; "reversed": query = q2, relevant = q1;
the query title itself is never retrieved, pairs with q1 == q2 are dropped):

1. the ceiling: identical query texts get one ranking, so Acc@1 <= distinct query texts / queries;
2. BM25 (the embedded Lucene-like engine) Acc@1/Acc@10, and how often its top-1 is *some* known duplicate
   of the query (any duplicate pair of ``train_titles.tsv``), i.e. how many misses are unlabelled hits;
3. a dual encoder trained with in-batch negatives (IDF-initialised weighted bag of word2vec vectors;
   word2vec trained on the collection's titles, unsupervised), alone and fused with BM25 over BM25's
   top-``--depth`` (min-max both, β on dev Acc@1); the epoch is chosen on dev Acc@1 (as specified);
4. that encoder's pair accuracy on the ``val.tsv`` title pairs of ``paper_models.py`` (threshold on
   their dev half, accuracy on the test half).

Everything is seeded (random, numpy, torch, word2vec with one worker and a fixed hash), so a rerun
reproduces the figures. Writes ``benchmarks/askubuntu_protocol.json``.

Usage: ``python benchmarks/askubuntu_protocol.py [--epochs 6] [--threads 1]``
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import subprocess
import sys
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from gensim.models import Word2Vec
from torch import nn
from tqdm import tqdm

from es_plugin_bridge.engines.index import EmbeddedIndex
from es_plugin_bridge.evaluation.classify import accuracy_at, best_threshold
from es_plugin_bridge.text.pipeline import Preprocessor

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ESRERANK = str(Path(sys.executable).with_name("esrerank"))
Pairs = list[tuple[int, int]]
Ranked = list[tuple[list[int], list[float]]]
KEYS = ["queries", "distinct_queries", "acc1_ceiling", "bm25_acc1", "bm25_acc10",
        "bm25_top1_known_duplicate", "dual_acc1", "dual_acc10", "fused_acc1", "fused_beta",
        "dual_over_bm25", "fused_over_bm25"]  # fmt: skip
HEADS = ["queries", "distinct", "ceil@1", "BM25@1", "BM25@10", "top1dup",
         "dual@1", "dual@10", "fused@1", "β", "dual/BM25", "fused/BM25"]  # fmt: skip
# numeric options; depth: how many BM25 candidates the fusion reranks
OPTIONS = {"epochs": 6, "lr": 1e-2, "scale": 20.0, "batch": 256, "w2v-epochs": 30, "dim": 200,
           "depth": 100, "max-len": 30, "seed": 1, "threads": 1}  # fmt: skip
LEGEND = "top1dup = % of distinct queries whose BM25 top-1 is a known duplicate"


def read_tsv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8") as fh:
        return [[f.strip() for f in line.rstrip("\n").split("\t")] for line in fh if line.strip()]


def ensure_split(pairs: Path, split_dir: Path) -> None:
    if all((split_dir / f"{s}.tsv").is_file() for s in ("train", "dev", "test")):
        return
    argv = [ESRERANK, "split", f"pairs:{pairs}", "--out-dir", str(split_dir)]
    argv += ["--dev", "1000", "--test", "2000", "--seed", "1"]
    print("$ esrerank " + shlex.join(argv[1:]), flush=True)
    subprocess.run(argv, check=True)


def crc_hash(s: str) -> int:  # word2vec's per-word init seed, independent of PYTHONHASHSEED
    return zlib.crc32(s.encode("utf-8"))


W2V = {"sg": 1, "window": 5, "min_count": 1, "workers": 1, "hashfxn": crc_hash}  # reproducible word2vec


class BagEncoder(nn.Module):
    """Weighted sum of word vectors; the weights start as IDF and are learnt with the vectors."""

    def __init__(self, vectors: np.ndarray, idf: np.ndarray) -> None:
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(torch.tensor(vectors), freeze=False, padding_idx=0)
        self.w = nn.Parameter(torch.tensor(idf))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wt = self.w[x] * (x > 0).float()
        return F.normalize((self.emb(x) * wt.unsqueeze(-1)).sum(1), dim=-1)


def encode_all(enc: BagEncoder, ids: torch.Tensor) -> torch.Tensor:
    enc.eval()
    with torch.no_grad():
        out = torch.cat([enc(ids[i : i + 2048]) for i in range(0, len(ids), 2048)])
    enc.train()
    return out


def dense_acc(V: torch.Tensor, qs: Pairs) -> tuple[float, float]:
    """Acc@1, Acc@10 (%) ranking the whole collection; ties go to the earlier document, as in the engine."""
    q, rel = torch.tensor([a for a, _ in qs]), torch.tensor([b for _, b in qs])
    rows = torch.arange(len(qs))
    sims = V[q] @ V.T
    sims[rows, q] = -float("inf")
    s_rel = sims[rows, rel].unsqueeze(1)
    before = torch.arange(V.shape[0]).unsqueeze(0) < rel.unsqueeze(1)
    rank = (sims > s_rel).sum(1) + ((sims == s_rel) & before).sum(1) + 1
    return 100 * (rank == 1).float().mean().item(), 100 * (rank <= 10).float().mean().item()


def bm25_eval(
    index: EmbeddedIndex, toks: list[list[str]], qs: Pairs, dups: dict[int, set[int]], depth: int
) -> tuple[float, float, float, Ranked]:
    """Acc@1, Acc@10, % of distinct queries whose top-1 is a known duplicate, and the top-``depth`` lists."""
    ranked: Ranked = []
    at1 = at10 = 0
    first: dict[int, int] = {}
    for a, b in qs:
        hits = index.search(toks[a], depth, exclude={str(a)})
        docs = [int(d) for d, _ in hits]
        ranked.append((docs, [s for _, s in hits]))
        at1 += docs[:1] == [b]
        at10 += b in docs[:10]
        first[a] = docs[0] if docs else -1
    known = 100 * np.mean([t in dups[a] for a, t in first.items()])
    return 100 * at1 / len(qs), 100 * at10 / len(qs), float(known), ranked


def fused_acc(V: torch.Tensor, qs: Pairs, ranked: Ranked, beta: float) -> float:
    hits = 0
    for (a, b), (docs, scores) in zip(qs, ranked, strict=True):
        if b not in docs:
            continue
        x = torch.tensor(scores, dtype=torch.float32)
        c = V[docs] @ V[a]
        x, c = ((v - v.min()) / (v.max() - v.min() + 1e-9) for v in (x, c))
        hits += docs[int(torch.argmax((1 - beta) * x + beta * c))] == b  # ties: BM25's order
    return 100 * hits / len(qs)


def pair_accuracy(
    enc: BagEncoder,
    pp: Preprocessor,
    wid: dict[str, int],
    args: argparse.Namespace,
    split_dir: Path,
    val: Path,
) -> dict[str, float]:
    """Accuracy on the val.tsv title pairs of ``paper_models.py`` (no training question), threshold on dev."""
    if not (split_dir / "val-test-titles.tsv").is_file():
        from paper_models import classification_pairs  # the same pairs as docs/results.md's table

        classification_pairs(val, split_dir)
    scores, labels = {}, {}
    for part in ("dev", "test"):
        rows = read_tsv(split_dir / f"val-{part}-titles.tsv")
        sides = []
        for side in (1, 2):
            ids = torch.zeros((len(rows), args.max_len), dtype=torch.long)
            for i, row in enumerate(rows):
                # words outside the collection have no vector: left out
                known = [wid[w] for w in pp.text_tokens(row[side]) if w in wid][: args.max_len]
                ids[i, : len(known)] = torch.tensor(known, dtype=torch.long)
            sides.append(encode_all(enc, ids))
        scores[part] = (sides[0] * sides[1]).sum(1).numpy()
        labels[part] = [int(row[0] == "duplicate") for row in rows]
    threshold, dev_accuracy = best_threshold(scores["dev"], labels["dev"])
    return {
        "pairs_dev": len(labels["dev"]),
        "pairs_test": len(labels["test"]),
        "dev_accuracy": round(100 * dev_accuracy, 2),
        "test_accuracy": round(100 * accuracy_at(scores["test"], labels["test"], threshold), 2),
    }


def train(
    args: argparse.Namespace, enc: BagEncoder, ids: torch.Tensor, train_pairs: Pairs, dev: Pairs
) -> tuple[int, list[dict[str, float]]]:
    """Symmetric in-batch softmax; keeps the state of the epoch with the best dev Acc@1."""
    opt = torch.optim.Adam(enc.parameters(), lr=args.lr)
    best: tuple[float, int, dict[str, torch.Tensor]] = (-1.0, 0, {})
    history: list[dict[str, float]] = []
    bar = tqdm(range(1, args.epochs + 1), desc="dual encoder", unit="epoch")
    for ep in bar:
        random.shuffle(train_pairs)
        total = 0.0
        for i in range(0, len(train_pairs), args.batch):
            bt = train_pairs[i : i + args.batch]
            a, b = torch.tensor([x for x, _ in bt]), torch.tensor([y for _, y in bt])
            neg = torch.tensor(random.sample(range(len(ids)), args.batch))  # random titles as extra negatives
            same = a.unsqueeze(1) == a.unsqueeze(0)  # a q1 repeated in the batch: its other q2s are positives
            same.fill_diagonal_(False)
            qa, qb = enc(ids[a]), enc(ids[b])
            logits = args.scale * qa @ enc(ids[torch.cat([b, neg])]).T
            logits[:, : len(bt)] = logits[:, : len(bt)].masked_fill(same, -1e4)
            back = (args.scale * qb @ qa.T).masked_fill(same, -1e4)
            target = torch.arange(len(bt))
            loss = F.cross_entropy(logits, target) + F.cross_entropy(back, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        dev1, _ = dense_acc(encode_all(enc, ids), dev)
        history.append({"epoch": ep, "loss": round(total, 2), "dev_acc1": round(dev1, 2)})
        bar.set_postfix(loss=f"{total:.1f}", dev_acc1=f"{dev1:.2f}")
        if dev1 > best[0]:
            best = (dev1, ep, {k: v.detach().clone() for k, v in enc.state_dict().items()})
    enc.load_state_dict(best[2])
    return best[1], history


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=Path, default=ROOT.parent / "shared/data/askubuntu-pairs/train_titles.tsv")
    p.add_argument("--split-dir", type=Path, default=ROOT / "runs/paper/askubuntu")
    p.add_argument("--out", type=Path, default=HERE / "askubuntu_protocol.json")
    for name, default in OPTIONS.items():
        p.add_argument(f"--{name}", type=type(default), default=default)
    args = p.parse_args()
    t0 = time.time()
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    ensure_split(args.pairs, args.split_dir)
    rows = read_tsv(args.pairs)
    titles = sorted({t for _, a, b in rows for t in (a, b)})
    tid = {t: i for i, t in enumerate(titles)}
    dups: dict[int, set[int]] = defaultdict(set)
    for label, a, b in rows:
        if label == "duplicate" and a != b:
            dups[tid[a]].add(tid[b])
            dups[tid[b]].add(tid[a])
    split = {
        s: [(tid[a], tid[b]) for label, a, b in read_tsv(args.split_dir / f"{s}.tsv") if label == "duplicate"]
        for s in ("train", "dev", "test")
    }
    dropped = {s: sum(a == b for a, b in v) for s, v in split.items()}
    split = {s: [(a, b) for a, b in v if a != b] for s, v in split.items()}
    pp = Preprocessor()
    toks = [pp.text_tokens(t) for t in tqdm(titles, desc="tokenising", unit="title")]
    qsets: dict[tuple[str, str], Pairs] = {}
    for s in ("dev", "test"):
        qsets[s, "as specified"] = split[s]
        qsets[s, "reversed"] = [(b, a) for a, b in split[s]]

    sizes = "/".join(str(len(v)) for v in split.values())
    print(f"collection: {len(titles)} titles; train/dev/test pairs {sizes} (q1 == q2 dropped: {dropped})")
    index = EmbeddedIndex.build(toks, "bm25")
    bm25 = {k: bm25_eval(index, toks, qs, dups, args.depth) for k, qs in qsets.items()}

    w2v = Word2Vec(toks, vector_size=args.dim, epochs=args.w2v_epochs, seed=args.seed, **W2V).wv
    df = Counter(w for t in toks for w in set(t))
    vocab = ["<pad>", *sorted(df)]  # every word has a word2vec vector (min_count 1, same titles)
    wid = {w: i for i, w in enumerate(vocab)}
    vectors = np.stack([np.zeros(args.dim, np.float32), *(w2v[w] for w in vocab[1:])])
    idf = np.log(len(titles) / np.array([df.get(w, 1) for w in vocab])).astype(np.float32)
    ids = torch.zeros((len(titles), args.max_len), dtype=torch.long)
    for i, t in enumerate(toks):
        s = [wid[w] for w in t][: args.max_len]
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    enc = BagEncoder(vectors, idf)
    best_epoch, history = train(args, enc, ids, list(split["train"]), qsets["dev", "as specified"])
    V = encode_all(enc, ids)
    pairs = pair_accuracy(enc, pp, wid, args, args.split_dir, args.pairs.parent / "val.tsv")

    results: dict[str, dict[str, float]] = {}
    betas = [round(0.1 * i, 1) for i in range(11)]
    for d in ("as specified", "reversed"):
        dev_fused = [fused_acc(V, qsets["dev", d], bm25["dev", d][3], b) for b in betas]
        beta = betas[int(np.argmax(dev_fused))]  # first best on ties
        for s in ("dev", "test"):
            qs = qsets[s, d]
            b1, b10, known, ranked = bm25[s, d]
            n, distinct = len(qs), len({a for a, _ in qs})
            d1, d10 = dense_acc(V, qs)
            f1 = fused_acc(V, qs, ranked, beta)
            values = [n, distinct, 100 * distinct / n, b1, b10, known, d1, d10, f1, beta, d1 / b1, f1 / b1]
            results[f"{s}/{d}"] = {
                k: v if isinstance(v, int) else round(v, 4) for k, v in zip(KEYS, values, strict=True)
            }

    print(f"\ndual encoder: best epoch {best_epoch} of {args.epochs} (dev Acc@1, as specified); {LEGEND}")
    print(f"{'split/direction':<21} " + " ".join(f"{h:>10}" for h in HEADS))
    for k, r in results.items():
        cells = (f"{r[m]:>10}" if isinstance(r[m], int) else f"{r[m]:>10.2f}" for m in KEYS)
        print(f"{k:<21} " + " ".join(cells))
    print(f"dual encoder pair accuracy (val.tsv title pairs, threshold on dev): {pairs}")
    wall = time.time() - t0
    print(f"wall time {wall:.0f} s")
    command = "python benchmarks/askubuntu_protocol.py " + shlex.join(sys.argv[1:])
    out = {
        "command": command.strip(),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "collection_titles": len(titles),
        "dropped_self_pairs": dropped,
        "dual_encoder": {"best_epoch": best_epoch, "history": history},
        "wall_seconds": round(wall, 1),
        "results": results,
        "pair_accuracy": pairs,
    }
    args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
