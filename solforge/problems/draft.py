"""A problem before it is written: definition fields, workloads and where it came from."""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import asdict, dataclass, field, replace
from typing import Any

_UUID_NAMESPACE = uuid.UUID("6f1c3d2a-6b47-4b8e-9d0e-5f0a7c2e9b11")
_CONTENT_FIELDS = ("name", "level", "category", "op_type", "axes", "inputs", "outputs", "reference",
                   "custom_inputs_entrypoint", "constraints", "workloads")  # fmt: skip


@dataclass(frozen=True)
class Source:
    """One place in one model where this exact problem occurs."""

    arch: str
    model: str
    family: str
    module: str
    config: tuple[tuple[str, Any], ...]

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "config": dict(self.config)}


@dataclass(frozen=True)
class ProblemDraft:
    """Everything a problem directory holds; ``sources`` grows when two models yield the same problem."""

    name: str
    level: str  # "L1" (single op) or "L2" (fused block)
    category: str  # folder the problem is written under: "L1", "L2" or "Quant"
    op_type: str
    summary: str
    axes: dict[str, dict[str, Any]]
    inputs: dict[str, dict[str, Any]]
    outputs: dict[str, dict[str, Any]]
    reference: str
    workloads: tuple[dict[str, Any], ...]
    custom_inputs_entrypoint: str | None = None
    constraints: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    sources: tuple[Source, ...] = field(default=(), compare=False)

    def content(self) -> dict[str, Any]:
        """What makes two problems the same problem (provenance excluded)."""
        values = {k: getattr(self, k) for k in _CONTENT_FIELDS}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

    def content_key(self) -> str:
        blob = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def with_sources(self, extra: tuple[Source, ...]) -> "ProblemDraft":
        merged = {(s.arch, s.module): s for s in (*self.sources, *extra)}
        return replace(self, sources=tuple(merged[k] for k in sorted(merged)))

    def models(self) -> list[str]:
        return sorted({s.model for s in self.sources})

    def families(self) -> list[str]:
        return sorted({s.family for s in self.sources})

    def definition_json(self) -> dict[str, Any]:
        models = self.models()
        where = "; ".join(f"{s.model} {s.module}" for s in self.sources)
        out: dict[str, Any] = {
            "name": self.name,
            "op_type": self.op_type,
            "description": f"{self.summary} Found in: {where}." if where else self.summary,
            "hf_id": models[0] if len(models) == 1 else models,
            "tags": sorted({*self.tags, f"level:{self.level}", *(f"family:{f}" for f in self.families())}),
            "axes": self.axes,
            "inputs": self.inputs,
            "outputs": self.outputs,
        }
        if self.constraints:
            out["constraints"] = list(self.constraints)
        out["reference"] = self.reference
        if self.custom_inputs_entrypoint:
            out["custom_inputs_entrypoint"] = self.custom_inputs_entrypoint
        out["provenance"] = {
            "generator": "solforge.problems",
            "level": self.level,
            "sources": [s.as_json() for s in self.sources],
        }
        return out

    def workload_lines(self) -> list[str]:
        return [json.dumps(w, separators=(", ", ": ")) for w in self.workloads]


def workload_uuid(problem: str, axes: dict[str, int]) -> str:
    """Stable id: the same problem and sizes always give the same uuid."""
    return str(uuid.uuid5(_UUID_NAMESPACE, f"{problem}|{json.dumps(axes, sort_keys=True)}"))
