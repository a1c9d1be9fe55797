"""``esrerank split``: duplicate clusters never cross splits; the same seed gives the same files."""

from __future__ import annotations

from pathlib import Path

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.split import split_pairs

TITLES = Path(__file__).resolve().parents[1] / "es_plugin_bridge/samples/askubuntu-pairs/train_titles.tsv"


def test_no_duplicate_crosses_splits_and_sizes_hold():
    pairs = read_spec(f"pairs:{TITLES}").pairs
    parts = split_pairs(pairs, {"dev": 1000, "test": 2000}, seed=1)
    assert sum(len(p) for p in parts.values()) == len(pairs)
    assert sum(p.label for p in parts["dev"]) >= 1000
    assert sum(p.label for p in parts["test"]) >= 2000
    where: dict[str, str] = {}
    for name, group in parts.items():
        for p in group:
            if p.label:
                for q in (p.q1.id, p.q2.id):
                    assert where.setdefault(q, name) == name, "a duplicate cluster crosses splits"


def test_split_command_is_deterministic_and_round_trips(tmp_path, cli):
    for out in ("a", "b"):
        code, _, err = cli(["split", f"pairs:{TITLES}", "--out-dir", str(tmp_path / out),
                            "--dev", "500", "--test", "500"])
        assert code == 0, err
    for name in ("train", "dev", "test"):
        assert (tmp_path / "a" / f"{name}.tsv").read_bytes() == (tmp_path / "b" / f"{name}.tsv").read_bytes()
    total = sum(len(read_spec(f"pairs:{tmp_path / 'a' / n}.tsv").pairs) for n in ("train", "dev", "test"))
    assert total == len(read_spec(f"pairs:{TITLES}").pairs)
