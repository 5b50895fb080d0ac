"""`bench/problem_args.py`: the options every bench script that measures problem directories takes. A library,
not a tool: the scripts import it (``from problem_args import problems_parser``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def problems_parser(doc: str | None, device: str = "cuda") -> argparse.ArgumentParser:
    """A parser with ``doc`` as its help, problem directories (or directories of problems) as its positionals,
    and ``--device``; the script adds its own options."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", type=Path, nargs="+", help="problem directories or directories of problems")
    ap.add_argument("--device", default=device)
    return ap
