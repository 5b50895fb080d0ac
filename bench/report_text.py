"""`bench/report_text.py`: the last step of the bench scripts that print a Markdown report: print it, and keep
it where asked. A library, not a tool: the scripts import it (``from report_text import emit_report``); its
test is `.venv/bin/python -m pytest -q tests/test_bench_scripts.py`."""

from __future__ import annotations

from pathlib import Path


def emit_report(lines: list[str], out: Path | None) -> str:
    """Print ``lines`` as one text and write it to ``out`` (parents made) when given; returns the text."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return text
