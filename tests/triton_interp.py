"""Run a test script under Triton's CPU interpreter (``TRITON_INTERPRET=1``) in a fresh interpreter.

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
