"""Write tests/tools/es_spec_shapes.json: the fields of the Elasticsearch specification classes that
the product's request bodies use, read from a checkout of elastic/elasticsearch-specification.

    python tests/tools/es_spec_shapes.py SPEC_GIT_DIR_OR_WORKTREE [--out tests/tools/es_spec_shapes.json]

Kept as a file so the shape tests (tests/elastic/test_es_requests.py) run without the specification. Each
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
    "SparseVectorProperty": "specification/_types/mapping/core.ts",
    "KnnRetriever": "specification/_types/Retriever.ts",
    "RRFRetriever": "specification/_types/Retriever.ts",
    "RRFRetrieverComponent": "specification/_types/Retriever.ts",
    "KnnSearch": "specification/_types/Knn.ts",
    "KnnQuery": "specification/_types/Knn.ts",
    "QueryVectorBuilder": "specification/_types/Knn.ts",
    "TextEmbedding": "specification/_types/Knn.ts",
    "SparseVectorQuery": "specification/_types/query_dsl/SparseVectorQuery.ts",
    "QueryBase": "specification/_types/query_dsl/abstractions.ts",
    "Pipeline": "specification/ingest/_types/Pipeline.ts",
    "ProcessorContainer": "specification/ingest/_types/Processors.ts",
    "ProcessorBase": "specification/ingest/_types/Processors.ts",
    "InferenceProcessor": "specification/ingest/_types/Processors.ts",
    "InputConfig": "specification/ingest/_types/Processors.ts",
    "ScriptProcessor": "specification/ingest/_types/Processors.ts",
    "CustomRequestParams": "specification/inference/_types/CommonTypes.ts",
    "CustomResponseParams": "specification/inference/_types/CommonTypes.ts",
    "ReindexSource": "specification/_global/reindex/types.ts#Source",
    "ReindexDestination": "specification/_global/reindex/types.ts#Destination",
    "SearchRequestBody": "specification/_global/search/_types/SearchRequestBody.ts",
    "MultisearchHeader": "specification/_global/msearch/types.ts",
    "Hit": "specification/_global/search/_types/hits.ts",
    "MatchQuery": "specification/_types/query_dsl/fulltext.ts",
    "ScriptScoreQuery": "specification/_types/query_dsl/specialized.ts",
    "ExistsQuery": "specification/_types/query_dsl/term.ts",
    "IdsQuery": "specification/_types/query_dsl/term.ts",
}
#: (file, block): the ``block`` (``query_parameters`` or ``body``) of ``export interface Request`` in file.
REQUEST_BLOCKS = {
    "SearchRequest.query_parameters": ("specification/_global/search/SearchRequest.ts", "query_parameters"),
    "SearchRequest.body": ("specification/_global/search/SearchRequest.ts", "body"),
    "MultiSearchRequest.query_parameters": (
        "specification/_global/msearch/MultiSearchRequest.ts", "query_parameters"
    ),
}
GENERIC = r"(?:<[^>{]*>)?"
#: Fields Elasticsearch's own parser accepts that the specification does not list yet, each with the
#: source file that declares it (checked there, not in the specification).
SOURCE_ONLY: dict[str, dict[str, str]] = {
    "TextSimilarityReranker": {
        "allow_rerank_failures": "x-pack/plugin/inference/src/main/java/org/elasticsearch/xpack/inference/"
        "rank/textsimilarity/TextSimilarityRankRetrieverBuilder.java (FAILURES_ALLOWED_FIELD; 8.19, 9.1)",
    },
}


def read(spec: Path, path: str) -> str:
    if (spec / path).is_file():
        return (spec / path).read_text(encoding="utf-8")
    return subprocess.run(
        ["git", f"--git-dir={spec}", "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def fields_of(block: str, indent: int) -> dict[str, tuple[bool, str]]:
    """``name -> (required, type)`` of the fields declared at ``indent`` spaces in ``block``."""
    pattern = re.compile(rf"^ {{{indent}}}(\w+)(\?)?: (.+?)\s*$")
    out = {}
    for line in block.splitlines():
        m = pattern.match(line)
        if m:
            out[m.group(1)] = (m.group(2) is None, m.group(3))
    return out


def parse(source: str, name: str) -> tuple[str | None, dict[str, tuple[bool, str]]]:
    """A class or interface (generic or not): its parent and its own fields."""
    decl = re.search(
        rf"^export (?:class|interface) {name}\b{GENERIC}(?: extends (\w+){GENERIC})?[^{{\n]*\{{\n(.*?)^\}}",
        source,
        re.M | re.S,
    )
    if decl is None:
        raise SystemExit(f"class {name} not found")
    return decl.group(1), fields_of(decl.group(2), 2)


def request_block(source: str, block: str) -> dict[str, tuple[bool, str]]:
    """The fields of one block of an API's ``Request`` interface."""
    request = re.search(r"^export interface Request extends \w+ \{\n(.*?)^\}", source, re.M | re.S)
    if request is None:
        raise SystemExit("interface Request not found")
    inner = re.search(rf"^  {block}\??: \{{\n(.*?)^  \}}", request.group(1), re.M | re.S)
    if inner is None:
        raise SystemExit(f"block {block} not found")
    return fields_of(inner.group(1), 4)


def entry(name: str, fields: dict[str, tuple[bool, str]], path: str) -> dict[str, object]:
    extra = SOURCE_ONLY.get(name, {})
    return {
        "fields": sorted({*fields, *extra}),
        "required": sorted(k for k, (req, _) in fields.items() if req),
        "types": {k: t for k, (_, t) in sorted(fields.items())},
        "file": path,
        **({"source_only": extra} if extra else {}),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", type=Path)
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "es_spec_shapes.json"
    )
    args = ap.parse_args()
    raw = {}
    for name, where in CLASSES.items():
        path, _, cls = where.partition("#")
        raw[name] = parse(read(args.spec, path), cls or name)

    def resolve(name: str) -> dict[str, tuple[bool, str]]:
        parent, fields = raw[name]
        return {**(resolve(parent) if parent in raw else {}), **fields}

    classes = {name: entry(name, resolve(name), CLASSES[name]) for name in CLASSES}
    for name, (path, block) in REQUEST_BLOCKS.items():
        classes[name] = entry(name, request_block(read(args.spec, path), block), path)
    commit = subprocess.run(
        ["git", f"--git-dir={args.spec}", "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    out = {"source": "elastic/elasticsearch-specification", "commit": commit, "classes": classes}
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(classes)} shapes, commit {commit[:12]})")


if __name__ == "__main__":
    main()
