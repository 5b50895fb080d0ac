"""The last step of the bench scripts that print a Markdown report: print it, and keep it where asked."""

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
