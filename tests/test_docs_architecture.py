"""docs/ARCHITECTURE.md names only things that exist: every file path, dotted module path and ``solforge`` /
``python -m sol_bench`` subcommand in backticks resolves in this checkout, and the page stays short."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs/ARCHITECTURE.md"
PACKAGES = ("sol_bench", "solforge", "agents", "flows", "tasks", "bench", "scripts")
FILE_SUFFIXES = (".py", ".md", ".json", ".jsonl", ".sh", ".yaml", ".toml", ".cu", ".cpp", ".sql")
MAX_LINES = 220  # readable in about ten minutes


@dataclass(frozen=True)
class Mention:
    text: str  # what stood between the backticks
    line: int
    bases: tuple[str, ...]  # folders the enclosing headings name, for paths written relative to them


def mentions(markdown: str) -> list[Mention]:
    """Every inline code span outside fenced blocks, with the folders its section's headings name."""
    found, heading_bases, fenced = [], {}, False
    for n, line in enumerate(markdown.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            heading_bases = {k: v for k, v in heading_bases.items() if k < level}
            heading_bases[level] = tuple(s for s in re.findall(r"`([^`]+)`", line) if s.endswith("/"))
            continue
        bases = tuple(b for level in sorted(heading_bases) for b in heading_bases[level])
        found += [Mention(s, n, bases) for s in re.findall(r"`([^`\n]+)`", line)]
    return found


def is_path(text: str) -> bool:
    if any(c in text for c in " <>*{}|=…") or text.startswith(("-", "/", "http")):
        return False
    return "/" in text or text.endswith(FILE_SUFFIXES)


def path_exists(m: Mention) -> bool:
    rel = m.text.split("::")[0]
    return any((REPO / base / rel).exists() for base in ("", *m.bases))


def is_module_path(text: str) -> bool:
    return re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", text) is not None and text.split(".")[0] in PACKAGES


def module_path_exists(text: str) -> bool:
    """``pkg.mod`` is a module or package here; ``pkg.mod.Name[.attr]`` also defines Name (read, not imported)."""
    parts = text.split(".")
    for cut in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if not source.is_file():
            continue
        rest = parts[cut:]
        if not rest:
            return True
        tree = ast.parse(source.read_text())
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        defined |= {t.id for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}  # fmt: skip
        defined |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
        return rest[0] in defined
    return False


def solforge_commands() -> dict[tuple[str, ...], bool]:
    """Every command path of the click CLI ('run',), ('problems', 'validate'), ..., and whether it is a group."""
    import click

    from solforge.cli import cli

    paths: dict[tuple[str, ...], bool] = {}

    def walk(group: click.Group, prefix: tuple[str, ...]) -> None:
        for name, cmd in group.commands.items():
            paths[(*prefix, name)] = isinstance(cmd, click.Group)
            if isinstance(cmd, click.Group):
                walk(cmd, (*prefix, name))

    walk(cli, ())
    return paths


def sol_bench_commands() -> set[str]:
    import argparse

    from sol_bench.cli import build_parser

    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def command_words(text: str, prefix: str) -> list[str]:
    """The words after ``prefix`` up to the first option, placeholder or argument."""
    words = []
    for w in text[len(prefix):].split():
        if not re.fullmatch(r"[a-z][a-z_-]*", w):
            break
        words.append(w)
    return words


def doc_errors(markdown: str) -> list[str]:
    errors = []
    commands, judge_commands = solforge_commands(), sol_bench_commands()
    for m in mentions(markdown):
        where = f"{DOC.relative_to(REPO)}:{m.line}: `{m.text}`"
        if m.text.startswith("solforge "):
            words = command_words(m.text, "solforge ")
            known = next((tuple(words[:i]) for i in range(len(words), 0, -1) if tuple(words[:i]) in commands), None)
            # a group must be followed by one of its subcommands, when a word follows it at all
            if known is None or (commands[known] and len(words) > len(known)):
                errors.append(f"{where}: no such solforge command")
        elif m.text.startswith("python -m sol_bench"):
            tail = m.text[len("python -m sol_bench"):].split()
            names = tail[0].split("|") if tail else []
            if not names or any(n not in judge_commands for n in names):
                errors.append(f"{where}: no such sol_bench command")
        elif is_path(m.text):
            if not path_exists(m):
                errors.append(f"{where}: no such file or folder (looked under {', '.join(('.',) + m.bases)})")
        elif is_module_path(m.text) and not module_path_exists(m.text):
            errors.append(f"{where}: no such module or name")
    return errors


def test_architecture_names_only_what_exists():
    errors = doc_errors(DOC.read_text())
    assert not errors, "\n".join(errors)


def test_architecture_is_short_and_keeps_the_threat_model():
    text = DOC.read_text()
    assert len(text.splitlines()) <= MAX_LINES, f"{DOC.name}: {len(text.splitlines())} lines, over {MAX_LINES}"
    assert "### Threat model and defences" in text


@pytest.mark.parametrize(
    "snippet, complaint",
    [
        ("## X (`sol_bench/`)\n\n`no_such_module.py` here", "no such file"),
        ("`agents/offline/nowhere.py`", "no such file"),
        ("`sol_bench.timing.no_such_name`", "no such module or name"),
        ("`solforge frobnicate PROBLEM_DIR`", "no such solforge command"),
        ("`solforge problems frobnicate`", "no such solforge command"),
        ("`python -m sol_bench eval|frob`", "no such sol_bench command"),
    ],
)
def test_the_checker_finds_what_does_not_exist(snippet, complaint):
    errors = doc_errors(snippet)
    assert len(errors) == 1 and complaint in errors[0], errors


def test_the_checker_accepts_paths_relative_to_their_section_and_real_commands():
    ok = ("## The judge (`sol_bench/`)\n\n`judge.py`, `sol/`, `sol_bench.timing.time_callable`,"
          " `solforge problems validate DIR`, `solforge run [PROBLEM_DIR...]`, `python -m sol_bench eval|validate`,"
          " `kernels_tmp/<hash>/`, `--timer cupti`\n\n```\nnot/checked.py\n```\n")  # fmt: skip
    assert doc_errors(ok) == []
    # a heading's folder does not leak into the next section at its level
    assert doc_errors("## A (`sol_bench/`)\n\n## B\n\n`judge.py`") != []
