"""Triton kernels tested without a GPU: a script run under Triton's CPU interpreter (``TRITON_INTERPRET=1``) in a
fresh interpreter, and a kernel compiled for sm_90 here.

The variable must be set before triton is imported, hence the subprocess. The script gets the repo root and
a JSON list of names as arguments and prints ``RESULT`` followed by a JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_interpreted(script: str, names: list[str], timeout_s: float) -> dict:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", script, str(REPO), json.dumps(names)],
                         capture_output=True, text=True, env=env, timeout=timeout_s, cwd=REPO)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "RESULT" in out.stdout, out.stdout[-3000:]
    return json.loads(out.stdout.split("RESULT", 1)[1])


def compile_sm90(fn, types: dict[str, str], constexprs: dict[str, object]):
    """``fn`` compiled by Triton for sm_90 on this machine (no GPU needed): arguments not in ``constexprs`` take
    their type from ``types`` (pointers by name, the rest i64 unless named)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile

    sig = {n: "constexpr" if n in constexprs else types.get(n, "i64") for n in fn.arg_names}
    src = ASTSource(fn=fn, signature=sig, constexprs={(fn.arg_names.index(k),): v for k, v in constexprs.items()})
    return compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "enable_fp_fusion": True})
