"""Every ``esrerank`` command and option written in README.md and docs/ exists in the CLI.

The docs are read as a user copies from them: every fenced code block and inline code span that holds
``esrerank ...`` is parsed (lines continued with a backslash joined), its subcommand path is walked
down the click tree of ``es_plugin_bridge.cli.main.cli``, and each ``--option`` written after it must
be one of that command's options. A renamed option or command fails here, not in a reader's shell.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from es_plugin_bridge.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`\n]+)`")
OPTION = re.compile(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)")
#: Where a shell command ends on its line: a comment, a chain, a pipe, a background job.
END = re.compile(r"\s(#|&&|\|\||;|\||&)(\s|$)")
#: Placeholders standing for any subcommand of a group.
ANY = {"...", "…", "COMMAND", "SUBCOMMAND"}
#: Options the docs name on their own that belong to another tool, and where that tool is.
OTHER_TOOLS = {"--adam": "benchmarks/paper_models.py", "--build-arg": "docker build",
               "--quick": "benchmarks/opensearch_modes.py",
               "--only-data-node-indexing": "benchmarks/node_loss.py",
               "--load-seconds": "benchmarks/node_loss.py", "--questions": "benchmarks/node_loss.py",
               "--rungs": "benchmarks/scale.py", "--ingest-limit": "benchmarks/scale.py",
               "--nodes": "benchmarks/scale.py", "--rate-sample": "benchmarks/scale.py",
               "--append": "benchmarks/scale.py", "--skip-hnsw": "benchmarks/scale.py",
               "--embedding": "benchmarks/resume_scale.py"}


def snippets(text: str) -> Iterator[str]:
    """Each ``esrerank ...`` command written in a page: from code blocks, then inline code spans."""
    blocks = FENCE.findall(text)
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            for match in re.finditer(r"(?<![\w./-])esrerank(?![\w-])", line):
                yield END.split(line[match.start():], maxsplit=1)[0]
    prose = FENCE.sub("", text)
    for span in SPAN.findall(prose):
        for match in re.finditer(r"(?<![\w./-])esrerank(?![\w-])", span):
            yield span[match.start():]


def _options(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        names.update(param.opts)
        names.update(param.secondary_opts)
    return names


def _subcommands(group: click.Group) -> dict[str, click.Command]:
    ctx = click.Context(group)
    found = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    return {name: command for name, command in found.items() if command is not None}


def resolve(snippet: str) -> tuple[list[str], list[click.Command], list[str]]:
    """(the subcommand path, the commands it may be — several where a placeholder or ``a|b`` stands —,
    problems found on the way)."""
    words = snippet.split()[1:]
    path: list[str] = []
    nodes: list[click.Command] = [cli]
    problems: list[str] = []
    for word in words:
        word = word.strip("[]{}()`'\",")
        groups = [n for n in nodes if isinstance(n, click.Group)]
        if not groups or not word or word.startswith("-"):
            break
        if word in ANY:
            nodes = [c for g in groups for c in _subcommands(g).values()]
            path.append(word)
            continue
        known = {name: c for g in groups for name, c in _subcommands(g).items()}
        names = word.split("|")
        if not all(name in known for name in names):
            if nodes == [cli]:
                problems.append(f"`esrerank {word}`: no such command (commands: {', '.join(sorted(known))})")
            elif not word.isupper():  # `es SPEC`-like placeholders are arguments, not commands
                problems.append(f"`esrerank {' '.join(path)} {word}`: no such subcommand "
                                f"({', '.join(sorted(known))})")
            break
        nodes = [known[name] for name in names]
        path.append(word)
    return path, nodes, problems


def check(snippet: str) -> list[str]:
    """Problems of one snippet: an unknown command, or an option none of its commands has."""
    path, nodes, problems = resolve(snippet)
    allowed = set().union(*(_options(n) for n in nodes))
    for option in OPTION.findall(snippet):
        if option not in allowed:
            problems.append(f"`esrerank {' '.join(path)}` has no option {option}")
    return problems


def _walk(command: click.Command) -> Iterator[click.Command]:
    yield command
    if isinstance(command, click.Group):
        for sub in _subcommands(command).values():
            yield from _walk(sub)


def lone_options(text: str) -> Iterator[str]:
    """Options written on their own in inline code (`--train-seconds`), outside any command."""
    for span in SPAN.findall(FENCE.sub("", text)):
        if span.startswith("--"):
            yield from OPTION.findall(span)


def test_the_pages_hold_commands_to_check():
    found = [s for page in PAGES for s in snippets(page.read_text(encoding="utf-8"))]
    assert len(PAGES) >= 9 and len(found) > 50
    paths = {" ".join(resolve(s)[0]) for s in found}
    assert {"demo", "evaluate", "train", "serve", "es setup", "es search"} <= paths


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_option_written_exists(page):
    problems = [f"{problem}\n    in: {snippet.strip()}"
                for snippet in snippets(page.read_text(encoding="utf-8")) for problem in check(snippet)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_option_written_on_its_own_is_some_commands(page):
    every = set().union(*(_options(c) for c in _walk(cli)))
    unknown = sorted({o for o in lone_options(page.read_text(encoding="utf-8"))
                      if o not in every and o not in OTHER_TOOLS})
    assert not unknown, f"options no esrerank command has: {unknown}"


def test_the_other_tools_options_are_theirs():
    for option in (o for o, tool in OTHER_TOOLS.items() if tool.endswith(".py")):
        assert option in (ROOT / OTHER_TOOLS[option]).read_text(encoding="utf-8")


def test_a_wrong_command_or_option_is_caught():
    assert check("esrerank demo --papers --skip-training") == []
    assert check("esrerank es search QUERY --mode native|vectors --explain") == []
    assert check("esrerank es setup|index MODEL --index forum") == []
    assert check("esrerank demo --no-such-option")
    assert check("esrerank nope --out x")
    assert check("esrerank es nope")
    assert check("esrerank es search --dev x")
