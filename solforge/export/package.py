"""Write the importable package of exported winners: ``solforge_kernels/``, one sub-package per problem,
each registering its winner as a torch custom op (``torch.ops.solforge_kernels.<op>``)."""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sol_bench.models import Definition, Solution

from . import kernel_runtime
from .signatures import python_annotation

PACKAGE = "solforge_kernels"
NAMESPACE = "solforge_kernels"


class ExportError(Exception):
    """A winner that cannot be exported as a custom op (the message names the problem and the field)."""


def op_name(problem: str) -> str:
    """A Python identifier (and operator name) for a problem name."""
    name = re.sub(r"\W", "_", problem)
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = f"op_{name}"
    return name


@dataclass(frozen=True)
class OpExport:
    """Everything one op directory is written from."""

    op: str
    definition: Definition
    solution: Solution
    device_type: str
    judged: list[dict[str, Any]]
    provenance: dict[str, Any]


def _op_module(e: OpExport) -> str:
    d = e.definition
    if any(s.is_scalar for s in d.outputs.values()):
        raise ExportError(f"{d.name}: definition.json outputs: scalar outputs cannot be returned by a custom op")
    params = ", ".join(f"{n}: {python_annotation(d, n)}" for n in d.inputs)
    names = ", ".join(d.inputs)
    n_out = len(d.outputs)
    ret = "torch.Tensor" if n_out == 1 else f"tuple[{', '.join(['torch.Tensor'] * n_out)}]"
    p = e.provenance
    return f'''"""{d.name}: the winner {p["candidate_id"]} of run {p["run_id"]} ({", ".join(p["languages"])}), as
torch.ops.{NAMESPACE}.{e.op}. It runs on the {len(e.judged)} input signature(s) it was judged on ({e.device_type},
listed in manifest.json) and falls back to the problem's reference everywhere else; ``runtime.calls`` counts both.
"""

from __future__ import annotations

import torch

from .._runtime import KernelOp

runtime = KernelOp.from_dir(__file__)


@torch.library.custom_op("{NAMESPACE}::{e.op}", mutates_args=())
def op({params}) -> {ret}:
    return runtime({names})


@op.register_fake
def _(*args):
    return runtime.fake(*args)
'''


def write_op(e: OpExport, package_dir: Path) -> Path:
    d, s = e.definition, e.solution
    root = package_dir / e.op
    kernel_dir = root / kernel_runtime.KERNEL_DIR
    kernel_dir.mkdir(parents=True, exist_ok=True)
    for src in s.sources:
        f = kernel_dir / src.path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(src.content)
    (root / kernel_runtime.REFERENCE_FILE).write_text(d.reference)
    manifest = {
        "op": e.op,
        "problem": d.name,
        "inputs": {n: {"scalar": spec.is_scalar, "dtype": spec.dtype} for n, spec in d.inputs.items()},
        "outputs": {n: {"dtype": spec.dtype} for n, spec in d.outputs.items()},
        "device_type": e.device_type,
        "destination_passing_style": s.spec.destination_passing_style,
        "cpp": s.spec.is_cpp,
        "entry_file": s.spec.entry_file,
        "entry_function": s.spec.entry_function,
        "compile_options": s.spec.compile_options.model_dump(),
        "judged": e.judged,
        "provenance": e.provenance,
    }
    (root / kernel_runtime.MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    (root / "__init__.py").write_text(_op_module(e))
    return root


def write_package(ops: list[OpExport], out_dir: Path) -> Path:
    """``out_dir/solforge_kernels/``: the runtime, one sub-package per op, and an ``__init__`` importing all."""
    package_dir = out_dir / PACKAGE
    package_dir.mkdir(parents=True, exist_ok=True)
    (package_dir / "_runtime.py").write_text(Path(kernel_runtime.__file__).read_text())
    written = []
    for e in sorted(ops, key=lambda e: e.op):
        write_op(e, package_dir)
        written.append(e.op)
    lines = [
        '"""Kernels exported by solforge. Importing this package registers each one as a torch custom op,',
        f'torch.ops.{NAMESPACE}.<name>; ``OPS`` maps each name to it."""',
        "",
        *(f"from . import {op}" for op in written),
        "",
        "OPS = {" + ", ".join(f"{op!r}: {op}.op" for op in written) + "}",
        "",
    ]
    (package_dir / "__init__.py").write_text("\n".join(lines))
    return package_dir
