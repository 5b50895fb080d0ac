"""Directories that appear whole or not at all: built in a sibling temp dir, then renamed over the target."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def replacing_dir(target: Path) -> Iterator[Path]:
    """Yield an empty temp dir beside ``target``; if the block succeeds it takes ``target``'s place (an existing
    ``target`` is moved aside first, then deleted), otherwise it is removed and ``target`` is untouched."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if target.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            os.replace(target, trash / "old")
            os.replace(tmp, target)
            shutil.rmtree(trash)
        else:
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
