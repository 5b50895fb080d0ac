"""Trusted code (the eager reference, T_b's variants) as solutions the judge times like any candidate.

Timing the reference in the judge's own process while the candidate is timed in a sandboxed worker made
the same code read 0.07x to 0.65x of itself on the CPU (issue 29): one process against two, the judge's
clock against an in-process one, different preparation. Here the reference becomes a pytorch-language
solution that returns what ``run`` returns, so it is started, fed and timed by the very same path.
"""

from __future__ import annotations

from .models import Definition, Solution

REFERENCE_FILE = "solforge_reference_run.py"
ENTRY = "solforge_entry"

# Appended to the reference's source: returns a tuple of tensors whatever ``run`` returns (a reference may
# return Python numbers for 0-d outputs, which the worker would refuse from a candidate).
_ENTRY_SOURCE = '''

# ---- sol_bench: the reference as a timed subject ----
import torch as _sol_bench_torch


def {entry}(*args):
    out = {target}(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    device = next((a.device for a in args if isinstance(a, _sol_bench_torch.Tensor)), None)
    return tuple(o if isinstance(o, _sol_bench_torch.Tensor) else _sol_bench_torch.tensor(o, device=device)
                 for o in outs)
'''


def trusted_solution(definition: Definition, name: str, target: str = "run", dps: bool = False,
                     extra: str = "") -> Solution:  # fmt: skip
    """The reference's source, then ``extra`` (a wrapper defining ``target``), as one solution whose entry
    calls ``target`` (non-DPS) or is ``target`` itself (DPS)."""
    body = definition.reference.rstrip() + "\n" + extra
    if not dps:
        body += _ENTRY_SOURCE.format(entry=ENTRY, target=target)
    return Solution.model_validate({
        "name": name,
        "definition": definition.name,
        "author": "sol_bench",
        "description": f"trusted: {name}",
        "spec": {"languages": ["pytorch"], "entry_point": f"{REFERENCE_FILE}::{ENTRY if not dps else target}",
                 "destination_passing_style": dps},
        "sources": [{"path": REFERENCE_FILE, "content": body}],
    })  # fmt: skip


def reference_solution(definition: Definition) -> Solution:
    """The eager reference, timed as the judge times a candidate."""
    return trusted_solution(definition, f"{definition.name}__eager_reference")
