"""Write tests/data/es_spec_shapes_hybrid.json: the specification's shapes that modes ``hybrid`` and
``hybrid-rrf`` use, read from a checkout of elastic/elasticsearch-specification.

    python tests/tools/es_spec_shapes_hybrid.py SPEC_GIT_DIR_OR_WORKTREE [--out FILE]

A companion of ``tests/tools/es_spec_shapes.py`` (same format: fields, required fields, file), kept
apart so that file and its data stay as they are. Two additions: ``interface`` declarations and
generic classes (``KnnSearch``, ``Hit<TDocument>``), and the ``query_parameters``/``body`` blocks of an
API's ``Request`` (``_global/search``, ``_global/msearch``). Each field also keeps its TypeScript type,
so a test can read e.g. that ``Hit.matched_queries`` is ``string[] | Dictionary<string, double>``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

RETRIEVER = "specification/_types/Retriever.ts"
CLASSES = {
    "RetrieverContainer": RETRIEVER,
    "RetrieverBase": RETRIEVER,
    "StandardRetriever": RETRIEVER,
    "KnnRetriever": RETRIEVER,
    "RRFRetriever": RETRIEVER,
    "RRFRetrieverComponent": RETRIEVER,
    "KnnSearch": "specification/_types/Knn.ts",
    "Rescore": "specification/_global/search/_types/rescoring.ts",
    "RescoreQuery": "specification/_global/search/_types/rescoring.ts",
    "SearchRequestBody": "specification/_global/search/_types/SearchRequestBody.ts",
    "MultisearchHeader": "specification/_global/msearch/types.ts",
    "Hit": "specification/_global/search/_types/hits.ts",
    "QueryBase": "specification/_types/query_dsl/abstractions.ts",
    "MatchQuery": "specification/_types/query_dsl/fulltext.ts",
    "ScriptScoreQuery": "specification/_types/query_dsl/specialized.ts",
    "ExistsQuery": "specification/_types/query_dsl/term.ts",
    "IdsQuery": "specification/_types/query_dsl/term.ts",
}
#: (name, file, block): the ``block`` of ``export interface Request`` in ``file``.
REQUEST_BLOCKS = {
    "SearchRequest.query_parameters": ("specification/_global/search/SearchRequest.ts", "query_parameters"),
    "SearchRequest.body": ("specification/_global/search/SearchRequest.ts", "body"),
    "MultiSearchRequest.query_parameters": (
        "specification/_global/msearch/MultiSearchRequest.ts", "query_parameters"
    ),
}
GENERIC = r"(?:<[^>{]*>)?"


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
    decl = re.search(
        rf"^export (?:class|interface) {name}\b{GENERIC}(?: extends (\w+){GENERIC})?[^{{\n]*\{{\n(.*?)^\}}",
        source,
        re.M | re.S,
    )
    if decl is None:
        raise SystemExit(f"class {name} not found")
    return decl.group(1), fields_of(decl.group(2), 2)


def request_block(source: str, block: str) -> dict[str, tuple[bool, str]]:
    request = re.search(r"^export interface Request extends \w+ \{\n(.*?)^\}", source, re.M | re.S)
    if request is None:
        raise SystemExit("interface Request not found")
    inner = re.search(rf"^  {block}\??: \{{\n(.*?)^  \}}", request.group(1), re.M | re.S)
    if inner is None:
        raise SystemExit(f"block {block} not found")
    return fields_of(inner.group(1), 4)


def entry(fields: dict[str, tuple[bool, str]], path: str) -> dict[str, object]:
    return {
        "fields": sorted(fields),
        "required": sorted(k for k, (req, _) in fields.items() if req),
        "types": {k: t for k, (_, t) in sorted(fields.items())},
        "file": path,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec", type=Path)
    ap.add_argument(
        "--out", type=Path,
        default=Path(__file__).resolve().parents[1] / "data" / "es_spec_shapes_hybrid.json",
    )
    args = ap.parse_args()
    raw = {name: parse(read(args.spec, path), name) for name, path in CLASSES.items()}

    def resolve(name: str) -> dict[str, tuple[bool, str]]:
        parent, fields = raw[name]
        return {**(resolve(parent) if parent in raw else {}), **fields}

    classes = {name: entry(resolve(name), CLASSES[name]) for name in CLASSES}
    for name, (path, block) in REQUEST_BLOCKS.items():
        classes[name] = entry(request_block(read(args.spec, path), block), path)
    commit = subprocess.run(
        ["git", f"--git-dir={args.spec}", "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    out = {"source": "elastic/elasticsearch-specification", "commit": commit, "classes": classes}
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(classes)} shapes, commit {commit[:12]})")


if __name__ == "__main__":
    main()
