"""Files that appear whole or not at all: written to a temporary name beside the target, then renamed."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def atomic_text(text: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    tmp.write_text(text)
    os.replace(tmp, path)
