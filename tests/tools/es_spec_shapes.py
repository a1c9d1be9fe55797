"""Write tests/data/es_spec_shapes.json: the fields of the Elasticsearch specification classes that
the product's request bodies use, read from a checkout of elastic/elasticsearch-specification.

    python tests/tools/es_spec_shapes.py SPEC_GIT_DIR_OR_WORKTREE [--out tests/data/es_spec_shapes.json]

Kept as a file so the shape tests (tests/test_es_requests.py) run without the specification. Each
class lists its own and inherited fields, and which are required (no ``?`` in the TypeScript).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

CLASSES = {
    "RetrieverContainer": "specification/_types/Retriever.ts",
    "RetrieverBase": "specification/_types/Retriever.ts",
    "StandardRetriever": "specification/_types/Retriever.ts",
    "LinearRetriever": "specification/_types/Retriever.ts",
    "InnerRetriever": "specification/_types/Retriever.ts",
    "TextSimilarityReranker": "specification/_types/Retriever.ts",
    "RescorerRetriever": "specification/_types/Retriever.ts",
    "Rescore": "specification/_global/search/_types/rescoring.ts",
    "RescoreQuery": "specification/_global/search/_types/rescoring.ts",
    "CustomServiceSettings": "specification/inference/_types/CommonTypes.ts",
    "SettingsSimilarityBm25": "specification/indices/_types/IndexSettings.ts",
    "SettingsSimilarityLmd": "specification/indices/_types/IndexSettings.ts",
    "SettingsSimilarityLmj": "specification/indices/_types/IndexSettings.ts",
    "SettingsSimilarityDfr": "specification/indices/_types/IndexSettings.ts",
    "SettingsSimilarityIb": "specification/indices/_types/IndexSettings.ts",
    "SettingsSimilarityScripted": "specification/indices/_types/IndexSettings.ts",
    "PropertyBase": "specification/_types/mapping/Property.ts",
    "CorePropertyBase": "specification/_types/mapping/core.ts",
    "TextProperty": "specification/_types/mapping/core.ts",
    "RankFeaturesProperty": "specification/_types/mapping/core.ts",
    "DenseVectorProperty": "specification/_types/mapping/DenseVectorProperty.ts",
    "DenseVectorIndexOptions": "specification/_types/mapping/DenseVectorProperty.ts",
}
FIELD = re.compile(r"^  (\w+)(\?)?: ")


def read(spec: Path, path: str) -> str:
    if (spec / path).is_file():
        return (spec / path).read_text(encoding="utf-8")
    return subprocess.run(
        ["git", f"--git-dir={spec}", "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def parse(source: str, name: str) -> tuple[str | None, dict[str, bool]]:
    match = re.search(rf"^export class {name}(?: extends (\w+))? \{{\n(.*?)^\}}", source, re.M | re.S)
    if match is None:
        raise SystemExit(f"class {name} not found")
    fields = {}
    for line in match.group(2).splitlines():
        m = FIELD.match(line)
        if m:
            fields[m.group(1)] = m.group(2) is None
    return match.group(1), fields


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", type=Path)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "es_spec_shapes.json"
    )
    args = ap.parse_args()
    raw = {name: parse(read(args.spec, path), name) for name, path in CLASSES.items()}

    def resolve(name: str) -> dict[str, bool]:
        parent, fields = raw[name]
        return {**(resolve(parent) if parent in raw else {}), **fields}

    commit = subprocess.run(
        ["git", f"--git-dir={args.spec}", "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    out = {
        "source": "elastic/elasticsearch-specification",
        "commit": commit,
        "classes": {
            name: {
                "fields": sorted(resolve(name)),
                "required": sorted(k for k, v in resolve(name).items() if v),
                "file": CLASSES[name],
            }
            for name in CLASSES
        },
    }
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(CLASSES)} classes, commit {commit[:12]})")


if __name__ == "__main__":
    main()
