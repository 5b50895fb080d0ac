#!/usr/bin/env bash
# Create .venv at the repo root with every package of the stack, pinned by constraints.txt.
# Idempotent: a second run only checks. torch goes first and alone, so pip takes the CPU build
# already on this machine's disk instead of downloading a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
stamp=.venv/.solforge-setup
want=$(cat constraints.txt pyproject.toml | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "setup: creating .venv with $($PY --version)" >&2
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -c constraints.txt torch==2.13.0
.venv/bin/python -m pip install -q -c constraints.txt -e '.[pipeline,gpu,test]'
echo "$want" > "$stamp"
echo "setup: done" >&2
