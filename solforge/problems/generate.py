"""``solforge problems generate``: a seeded set of new problems composed from the op builders.

Each problem is sampled by a family of ``sampling``, its workloads cut to a GPU budget, written, then
checked the way a bundled problem is (it loads, its reference runs on the CPU on its smallest workload,
the speed-of-light model analyses it); a sample that fails any check is dropped and another drawn, and the
manifest says how many were dropped and why. Same seed and count: byte-identical output.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from random import Random
from typing import Any

from sol_bench import dtypes
from sol_bench.models import Definition

from .atomic import replacing_dir
from .draft import ProblemDraft, workload_uuid
from .sampling import FAMILIES, Sample

PREFIX = "gen_"
MIN_WORKLOADS = 8
# GPU budget per workload, priced for the eager reference on an H200 at rates it reaches in practice (well
# under peak): the largest workload of a problem stays far under a second.
GPU_SECONDS = 0.05
MAC_RATE = {"bfloat16": 2e14, "float16": 2e14, "float32": 2.5e13}
EFFECTIVE_BANDWIDTH = 5e11  # bytes/s: an eager reference reads and writes its intermediates several times
GPU_BYTES = 2 << 30  # inputs + outputs of one workload
SOL_REAL_BYTES = 256 << 20  # data-dependent references are traced on real inputs, at most this large
CPU_MACS = 4e9  # the CPU check's smallest workload


class GenerateError(ValueError):
    """A request the generator cannot honour, or a family that kept failing its checks."""


@dataclass(frozen=True)
class GenerateConfig:
    seed: int
    count: int
    families: tuple[str, ...] = ()  # empty: every family
    cpu_check_mib: int = 192  # the smallest workload's inputs and outputs, for the CPU check
    max_attempts: int = 30  # samples per problem before the generator gives up

    def chosen(self) -> tuple[str, ...]:
        return self.families or tuple(FAMILIES)

    def check(self) -> None:
        if self.count < 1:
            raise GenerateError(f"count must be at least 1, got {self.count}")
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise GenerateError(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
        if self.cpu_check_mib < 1:
            raise GenerateError(f"cpu_check_mib must be at least 1, got {self.cpu_check_mib}")


@dataclass(frozen=True)
class Rejection:
    """A sampled problem that was not kept: its family, the check it failed (``gpu_budget``, ``load``,
    ``cpu_check_cap``, ``reference_output``) and what that check saw."""

    family: str
    reason: str
    detail: str


@dataclass(frozen=True)
class Accepted:
    name: str
    path: str  # relative to the output directory
    family: str
    kinds: list[str]
    level: str
    tags: list[str]
    workloads: int
    config: dict[str, Any]


@dataclass
class Manifest:
    seed: int
    count: int
    families: list[str]
    cpu_check_mib: int
    problems: list[Accepted] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        by_reason: dict[str, int] = {}
        for r in self.rejected:
            by_reason[r.reason] = by_reason.get(r.reason, 0) + 1
        return {
            "generator": "solforge problems generate",
            "seed": self.seed,
            "count": self.count,
            "families": self.families,
            "cpu_check_mib": self.cpu_check_mib,
            "gpu_budget": {"seconds": GPU_SECONDS, "bytes": GPU_BYTES, "mac_rate": MAC_RATE,
                           "effective_bandwidth": EFFECTIVE_BANDWIDTH},  # fmt: skip
            "problems": [asdict(p) for p in self.problems],
            "rejected": {"total": len(self.rejected), "by_reason": dict(sorted(by_reason.items())),
                         "samples": [asdict(r) for r in self.rejected]},  # fmt: skip
        }


class _Reject(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


def _detail(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return re.sub(r"0x[0-9a-fA-F]+", "0x…", f"{type(e).__name__}: {text}")[:240]


def renamed(draft: ProblemDraft, name: str) -> ProblemDraft:
    """The draft under a new name; workload uuids follow the name."""
    loads = tuple({**w, "uuid": workload_uuid(name, w["axes"])} for w in draft.workloads)
    return replace(draft, name=name, workloads=loads)


def workload_cost(definition: Definition, axes: dict[str, int], sample: Sample) -> tuple[int, int, float]:
    """(bytes of inputs + outputs, tensor-core MACs, estimated seconds of the eager reference on the GPU)."""
    env = definition.resolve_axes(axes)
    specs = [*definition.inputs.values(), *definition.outputs.values()]
    nbytes = sum(dtypes.nbytes(s.dtype, s.concrete_shape(env)) for s in specs if s.shape is not None)
    macs = sample.macs(env)
    seconds = max(macs / MAC_RATE[sample.compute_dtype], nbytes / EFFECTIVE_BANDWIDTH)
    return nbytes, macs, seconds


def within_budget(draft: ProblemDraft, sample: Sample) -> ProblemDraft:
    """The draft with only the workloads the GPU budget allows; a problem left with too few is rejected."""
    definition = Definition.model_validate(definition_json(draft, sample, seed=0))
    cap = min(GPU_BYTES, SOL_REAL_BYTES) if sample.data_dependent else GPU_BYTES
    kept = []
    for w in draft.workloads:
        nbytes, _, seconds = workload_cost(definition, w["axes"], sample)
        if nbytes <= cap and seconds <= GPU_SECONDS:
            kept.append(w)
    if len(kept) < MIN_WORKLOADS:
        raise _Reject("gpu_budget", f"{len(kept)} of {len(draft.workloads)} workloads fit the GPU budget")
    return replace(draft, workloads=tuple(kept))


def definition_json(draft: ProblemDraft, sample: Sample, seed: int) -> dict[str, Any]:
    out = draft.definition_json()
    out.pop("hf_id", None)
    out["tags"] = sorted({*out["tags"], "generated", f"kind:{sample.kind}"})
    out["provenance"] = {"generator": "solforge problems generate", "seed": seed, "family": sample.family,
                         "level": draft.level, "config": sample.config}  # fmt: skip
    return out


def _write_problem(root: Path, draft: ProblemDraft, sample: Sample, seed: int) -> Path:
    """definition.json + workload.jsonl under root/<category>/<name>, written in a temp dir then renamed."""
    target = root / draft.category / draft.name
    with replacing_dir(target) as tmp:
        (tmp / "definition.json").write_text(json.dumps(definition_json(draft, sample, seed), indent=2) + "\n")
        (tmp / "workload.jsonl").write_text("\n".join(draft.workload_lines()) + "\n")
    return target


def check_problem(path: Path, sample: Sample, cpu_cap_bytes: int) -> None:
    """Loads; the smallest workload is under the CPU cap and its reference runs on the CPU with outputs of the
    declared shapes; the SOL model analyses the smallest and (on meta tensors) the largest workload."""
    from sol_bench.errors import SolBenchError
    from sol_bench.problem import load_problem
    from sol_bench.sol.analyze import analyze_workload
    from sol_bench.sol.hardware import get_hardware

    from .validate import ProblemInvalid, run_reference_cpu, smallest_workload

    try:
        problem = load_problem(path)
    except SolBenchError as e:
        raise _Reject("load", _detail(e)) from None
    small = smallest_workload(problem)
    env = problem.definition.resolve_axes(small.axes)
    if problem.workload_bytes(small) > cpu_cap_bytes or sample.macs(env) > CPU_MACS:
        raise _Reject("cpu_check_cap", f"smallest workload {small.axes} moves {problem.workload_bytes(small)} bytes")
    try:
        run_reference_cpu(problem)
    except ProblemInvalid as e:
        raise _Reject("reference_output", _detail(e)) from None
    except Exception as e:  # noqa: BLE001 - any failure of the reference rejects the sample
        raise _Reject("reference_failed", _detail(e)) from None
    hardware = get_hardware("H200")
    largest = max(problem.workloads, key=problem.workload_bytes)
    try:
        analyze_workload(problem.definition, small, hardware, real_cap_bytes=cpu_cap_bytes)
        if not sample.data_dependent:
            analyze_workload(problem.definition, largest, hardware, real_device=None)
    except Exception as e:  # noqa: BLE001 - the SOL model must price every workload
        raise _Reject("sol_analysis", _detail(e)) from None


def _family_plan(rng: Random, families: tuple[str, ...], count: int) -> list[str]:
    """Families in shuffled rounds, so every family appears once count reaches their number."""
    plan: list[str] = []
    while len(plan) < count:
        round_ = list(families)
        rng.shuffle(round_)
        plan += round_
    return plan[:count]


def _sample_one(rng: Random, family: str, seed: int, taken: set[str], root: Path,
                cpu_cap: int) -> tuple[ProblemDraft, Sample, Path]:
    sample = FAMILIES[family](rng)
    draft = renamed(sample.draft, PREFIX + sample.draft.name)
    if draft.name in taken:
        raise _Reject("duplicate_name", draft.name)
    try:
        draft = within_budget(draft, sample)
    except ValueError as e:
        raise _Reject("definition", _detail(e)) from None
    path = _write_problem(root, draft, sample, seed)
    try:
        check_problem(path, sample, cpu_cap)
    except _Reject:
        shutil.rmtree(path)
        raise
    return draft, sample, path


def generate_into(root: Path, config: GenerateConfig) -> Manifest:
    """Generate the problems under ``root`` (which must exist) and return the manifest (not written)."""
    config.check()
    families = config.chosen()
    manifest = Manifest(config.seed, config.count, list(families), config.cpu_check_mib)
    rng = Random(config.seed)
    taken: set[str] = set()
    for family in _family_plan(rng, families, config.count):
        for _ in range(config.max_attempts):
            try:
                draft, sample, path = _sample_one(rng, family, config.seed, taken, root, config.cpu_check_mib << 20)
            except _Reject as r:
                manifest.rejected.append(Rejection(family, r.reason, r.detail))
                continue
            taken.add(draft.name)
            tags = definition_json(draft, sample, config.seed)["tags"]
            manifest.problems.append(Accepted(
                name=draft.name, path=str(path.relative_to(root)), family=family, kinds=[sample.kind],
                level=draft.level, tags=tags, workloads=len(draft.workloads), config=sample.config,
            ))  # fmt: skip
            break
        else:
            last = manifest.rejected[-1]
            raise GenerateError(f"family {family!r}: no valid sample in {config.max_attempts} attempts "
                                f"(last: {last.reason}: {last.detail})")  # fmt: skip
    return manifest


def generate(out_dir: Path, config: GenerateConfig, overwrite: bool = False) -> Manifest:
    """Write the whole set to ``out_dir`` (problem dirs + manifest.json) via a sibling temp dir: on any
    failure nothing is left behind and an existing ``out_dir`` is untouched."""
    config.check()
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())) and not overwrite:
        raise GenerateError(f"{out_dir} exists and is not empty (use overwrite to replace it)")
    with replacing_dir(out_dir) as tmp:
        manifest = generate_into(tmp, config)
        (tmp / "manifest.json").write_text(json.dumps(manifest.as_json(), indent=2) + "\n")
    return manifest
