"""Per-module report of a ``mutmut run`` (``make mutation``): ``reports/mutation.json`` and a readable
``reports/mutation.md``.

mutmut keeps each mutated file's results in ``mutants/<path>.meta`` (JSON, ``exit_code_by_key``:
mutant name → the test run's exit code). A mutant listed in ``tests/tools/equivalent_mutants.json``
(name → why no test can tell it from the original) is counted apart, so the kill rate is over the
mutants a test could kill: (killed + timed out) / (all − equivalent − not yet checked).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10: the same parser, as a package (a dependency of pytest there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT = Path(__file__).with_name("equivalent_mutants.json")
#: mutmut's exit codes (mutmut/stats.py); anything else is "suspicious".
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          35: "suspicious", 36: "timeout", 37: "killed", 24: "timeout", -24: "timeout", 152: "timeout",
          255: "timeout", -11: "segfault", -9: "segfault", None: "not checked"}
TARGET = 0.90


def modules() -> list[str]:
    """The files ``[tool.mutmut] only_mutate`` names, in its order."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return list(config["tool"]["mutmut"]["only_mutate"])


def collect(mutants: Path, equivalent: dict[str, str]) -> dict[str, dict]:
    """``{module: {counts..., kill_rate, survivors, equivalent}}`` for every module mutmut has run."""
    report = {}
    for module in modules():
        meta = mutants / (module + ".meta")
        if not meta.is_file():
            report[module] = {"ran": False}
            continue
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        status = {name: ("equivalent" if name in equivalent else STATUS.get(code, "suspicious"))
                  for name, code in codes.items()}
        counts = Counter(status.values())
        checkable = len(status) - counts["equivalent"] - counts["not checked"]
        report[module] = {
            "ran": counts["not checked"] < len(status),
            "mutants": len(status), **{k: counts[k] for k in
                                       ("killed", "survived", "no tests", "timeout", "suspicious",
                                        "equivalent", "not checked")},
            "kill_rate": round((counts["killed"] + counts["timeout"]) / checkable, 4) if checkable else None,
            "survivors": sorted(n for n, s in status.items() if s in ("survived", "no tests")),
            "equivalent_mutants": {n: equivalent[n] for n in sorted(status) if n in equivalent},
        }
    return report


def table(report: dict[str, dict]) -> str:
    """The report as a Markdown table, survivors and equivalent mutants listed below it."""
    lines = ["# Mutation testing (mutmut)", "",
             "Kill rate = (killed + timeout) / (mutants − equivalent − not checked): a mutant that makes the "
             f"tests hang is caught too. Target ≥ {TARGET:.0%} per module.", "",
             "| module | mutants | killed | survived | no tests | timeout | equivalent | not checked "
             "| kill rate |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for module, r in report.items():
        if not r["ran"]:
            lines.append(f"| {module} | not run | | | | | | | |")
            continue
        rate = "–" if r["kill_rate"] is None else f"{r['kill_rate']:.1%}"
        lines.append(f"| {module} | {r['mutants']} | {r['killed']} | {r['survived']} | {r['no tests']} | "
                     f"{r['timeout']} | {r['equivalent']} | {r['not checked']} | {rate} |")
    for module, r in report.items():
        if r.get("survivors"):
            lines += ["", f"## Survivors in {module}", ""] + [f"- `{n}`" for n in r["survivors"]]
        if r.get("equivalent_mutants"):
            lines += ["", f"## Equivalent mutants in {module}", ""]
            lines += [f"- `{n}`: {why}" for n, why in r["equivalent_mutants"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    """``python tests/tools/mutation_report.py [OUT_DIR [MUTANTS_DIR]]`` (``reports``, ``mutants``)."""
    out = Path(argv[0]) if argv else ROOT / "reports"
    mutants = Path(argv[1]) if len(argv) > 1 else ROOT / "mutants"
    equivalent = json.loads(EQUIVALENT.read_text(encoding="utf-8")) if EQUIVALENT.is_file() else {}
    report = collect(mutants, equivalent)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutation.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / "mutation.md").write_text(table(report), encoding="utf-8")
    print(table(report).split("\n## ")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
