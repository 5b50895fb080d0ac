"""The judge's conformance corpus: small problems, honest solutions and cheats, with expected verdicts.

Layout::

    problems/<name>/        definition.json + workload.jsonl (blobs listed in ``blobs.json`` are written
                            by ``materialize``, with the standard library, so no binary file is committed)
    honest/<name>/          meta.json + source files of an honest solution
    cheats/<name>/          meta.json + source files of a cheat (CPU and GPU)
    gpu/<name>/             meta.json + sources of cheats and solutions that only mean something on a GPU

``meta.json``: ``problem``, ``spec`` (the solution's BuildSpec), ``expect`` (device kind -> status, or
device kind -> {workload uuid or "*": status}; a missing kind means "not run there"), ``why`` (what the
cheat tries and why the verdict is right). Sources may hold ``@@NAME@@`` placeholders that the caller
fills (``PROBLEM_DIR``, ``SOL_BENCH_DIR``, ``PORT``...).
"""

from __future__ import annotations

import json
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from sol_bench.models import Solution, Status

ROOT = Path(__file__).resolve().parent
GROUPS = ("honest", "cheats", "gpu")


@dataclass(frozen=True)
class Entry:
    group: str
    name: str
    path: Path
    problem: str
    spec: dict
    expect: dict
    why: str

    def expected(self, kind: str, uuid: str) -> Status | None:
        """Expected status of workload ``uuid`` on device kind 'cpu' or 'cuda' (None: not run there)."""
        e = self.expect.get(kind)
        if e is None:
            return None
        if isinstance(e, str):
            return Status(e)
        return Status(e.get(uuid, e["*"]))

    def solution(self, **params: object) -> Solution:
        sources = []
        for p in sorted(self.path.rglob("*")):
            if p.is_file() and p.name != "meta.json" and "__pycache__" not in p.parts:
                text = p.read_text()
                for k, v in params.items():
                    text = text.replace(f"@@{k}@@", str(v))
                sources.append({"path": p.relative_to(self.path).as_posix(), "content": text})
        return Solution.model_validate(
            {"name": f"{self.group}/{self.name}", "definition": self.problem, "author": "judge-corpus",
             "description": self.why, "spec": self.spec, "sources": sources}
        )  # fmt: skip

    def write_solution_json(self, dest: Path, **params: object) -> Path:
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(self.solution(**params).model_dump_json(indent=1))
        return dest


def entries(group: str) -> list[Entry]:
    out = []
    for meta in sorted((ROOT / group).glob("*/meta.json")):
        m = json.loads(meta.read_text())
        out.append(Entry(group, meta.parent.name, meta.parent, m["problem"], m["spec"], m["expect"], m.get("why", "")))
    return out


def entry(group: str, name: str) -> Entry:
    for e in entries(group):
        if e.name == name:
            return e
    raise KeyError(f"{group}/{name}")


def problem_names() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "problems").glob("*/definition.json"))


def problem_source(name: str) -> Path:
    if name == "rmsnorm_small":
        return ROOT.parent / "fixtures" / "problems" / "rmsnorm_small"
    return ROOT / "problems" / name


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> None:
    """A safetensors file from (dtype tag, shape, raw little-endian bytes), standard library only."""
    header, offset, blobs = {}, 0, []
    for key, (dtype, shape, raw) in tensors.items():
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def _f32(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def materialize(name: str, dest: Path, first_workloads: int | None = None) -> Path:
    """Copy problem ``name`` to ``dest/name`` (keeping only its first workloads if asked) and write its blobs."""
    target = Path(dest) / name
    shutil.copytree(problem_source(name), target, ignore=shutil.ignore_patterns("blobs.json"))
    if first_workloads is not None:
        lines = (target / "workload.jsonl").read_text().splitlines(keepends=True)
        (target / "workload.jsonl").write_text("".join(lines[:first_workloads]))
    spec = problem_source(name) / "blobs.json"
    if spec.is_file():
        for rel, tensors in json.loads(spec.read_text()).items():
            write_safetensors(
                target / rel, {k: ("F32", t["shape"], _f32(t["values"])) for k, t in tensors.items()}
            )
    return target
