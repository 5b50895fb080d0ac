"""Speed-of-light time of a workload: one roofline over the reference's whole graph.

    T_SOL = max(tensor-core MACs / peak MAC rate at the problem's precision, fused DRAM bytes / bandwidth)
            + the hardware model's launch floor (0.4 us on the leaderboard's B200 model, 0 elsewhere)

Fused bytes are the external inputs (weights included) and final outputs, each once, at its own dtype
width: intermediates, views and casts move nothing; a gather reads only the gathered values; a scatter
into an input writes only the scattered values. The precision is the narrowest floating type among the
tensor inputs, the matmul operands and any fp8/fp4 the reference quantises to.

The reference runs on meta tensors (no memory, any size). If it needs data (``nonzero``, ``.item()``,
data-dependent routing) it runs again on real inputs when they are small enough to make, else "mixed":
bulky values on meta and the rest real, the routing seeing values like those of generated inputs (``spill``).
"""

from __future__ import annotations

from typing import Any, Callable, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from .. import dtypes
from ..errors import InputError, SolBenchError
from ..inputs import InputContext, make_inputs, random_tensor
from ..models import Definition, Workload
from ..problem import Problem
from ..reference import Reference, load_reference
from .hardware import PRECISION_ORDER, HardwareModel, Precision
from .spill import spilling
from .trace import GraphCounter, on_device, recording

DEFAULT_REAL_CAP_BYTES = 1 << 30
# Mixed tracing: matmuls above this many MACs run on meta (about a second of CPU at most).
MIXED_MAX_MACS = 1 << 30


class SolAnalysisError(SolBenchError):
    """The speed-of-light model cannot analyse this workload; the message says why."""


class SolResult(BaseModel):
    """Speed-of-light of one workload on one hardware model."""

    model_config = ConfigDict(frozen=True)

    problem: str = Field(description="Problem name.")
    uuid: str = Field(description="Workload uuid.")
    macs: int = Field(ge=0, description="Tensor-core multiply-accumulates of matmul-like ops.")
    bytes: int = Field(ge=0, description="Fused DRAM bytes: external inputs read + outputs written.")
    precision: Precision = Field(description="Precision the MACs are priced at.")
    t_compute_ms: float = Field(ge=0, description="macs / peak MAC rate, ms.")
    t_memory_ms: float = Field(ge=0, description="bytes / DRAM bandwidth, ms.")
    t_floor_ms: float = Field(default=0.0, ge=0, description="The hardware model's fixed launch floor, ms.")
    t_sol_ms: float = Field(ge=0, description="max(t_compute_ms, t_memory_ms) + t_floor_ms.")
    bound: Literal["compute", "memory"] = Field(description="Which roof sets T_SOL.")
    hardware: str = Field(description="Hardware model name.")
    method: Literal["meta", "real", "mixed"] = Field(
        default="meta", description="Traced on meta, real, or mixed tensors (bulky values on meta, see spill.py)."
    )
    input_bytes: dict[str, int] = Field(default_factory=dict, description="Bytes read per external input.")


_DTYPE_PRECISION: dict[torch.dtype, Precision] = {
    torch.float16: Precision.fp16,
    torch.bfloat16: Precision.bf16,
    torch.float32: Precision.fp32,
    torch.float64: Precision.fp64,
    torch.int8: Precision.fp8,  # int8 tensor cores run at the fp8 rate
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        _DTYPE_PRECISION[getattr(torch, _name)] = Precision.fp8
if hasattr(torch, "float4_e2m1fn_x2"):
    _DTYPE_PRECISION[torch.float4_e2m1fn_x2] = Precision.nvfp4

_SPEC_PRECISION = {
    dtypes.DType.float4_e2m1: Precision.nvfp4,
    dtypes.DType.float4_e2m1fn_x2: Precision.nvfp4,
    dtypes.DType.float8_e4m3fn: Precision.fp8,
    dtypes.DType.float8_e5m2: Precision.fp8,
    dtypes.DType.float16: Precision.fp16,
    dtypes.DType.bfloat16: Precision.bf16,
    dtypes.DType.float32: Precision.fp32,
    dtypes.DType.float64: Precision.fp64,
}


def _narrowest(candidates: set[Precision]) -> Precision:
    for p in PRECISION_ORDER:
        if p in candidates:
            return p
    return Precision.fp32


def detect_precision(definition: Definition, counter: GraphCounter) -> Precision:
    found = {_SPEC_PRECISION[s.dtype] for s in definition.inputs.values() if not s.is_scalar and s.dtype in _SPEC_PRECISION}
    found |= {_DTYPE_PRECISION[d] for d in counter.matmul_dtypes | counter.quantised_dtypes if d in _DTYPE_PRECISION}
    return _narrowest(found)


def roofline(
    definition: Definition, workload: Workload, macs: int, nbytes: int, precision: Precision, hardware: HardwareModel
) -> SolResult:
    t_compute = macs / hardware.mac_rate(precision) * 1e3 if macs else 0.0
    t_memory = nbytes / hardware.bandwidth_bytes_per_s * 1e3
    t_floor = hardware.launch_floor_s * 1e3
    return SolResult(
        problem=definition.name,
        uuid=workload.uuid,
        macs=macs,
        bytes=nbytes,
        precision=precision,
        t_compute_ms=t_compute,
        t_memory_ms=t_memory,
        t_floor_ms=t_floor,
        t_sol_ms=max(t_compute, t_memory) + t_floor,
        bound="compute" if t_compute > t_memory else "memory",
        hardware=hardware.name,
    )


def _declared_input_bytes(definition: Definition, env: dict[str, int]) -> int:
    return sum(dtypes.nbytes(s.dtype, s.concrete_shape(env)) for s in definition.inputs.values() if not s.is_scalar)


def _meta_inputs(definition: Definition, workload: Workload, reference: Reference) -> dict[str, Any]:
    """Inputs on meta: safetensors blobs are not read, only their declared shapes matter here."""
    if any(s.type == "custom" for s in workload.inputs.values()):
        with on_device("meta"):
            return make_inputs(definition, workload, "meta", seed=0, reference=reference)
    env = definition.resolve_axes(workload.axes)
    out: dict[str, Any] = {}
    for name, spec in definition.inputs.items():
        src = workload.inputs.get(name)
        if src is not None and src.type == "scalar":
            out[name] = src.value
        elif spec.is_scalar:
            raise SolAnalysisError(f"scalar input {name!r} has no value in workload {workload.uuid}")
        else:
            out[name] = random_tensor(spec, spec.concrete_shape(env), torch.device("meta"), 0)
    return out


def _outputs_traffic(
    definition: Definition, env: dict[str, int], returned: Any, counter: GraphCounter
) -> list[tuple[torch.dtype, int]]:
    """(dtype, bytes) of each final output; an output that is an input updated in place was counted as written."""
    if isinstance(returned, dict):
        returned = list(returned.values())
    outs = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    specs = list(definition.outputs.values())
    traffic = []
    for i, out in enumerate(outs):
        if not isinstance(out, torch.Tensor):
            continue
        use = counter.use_of(out)
        if use is not None and use.written:
            continue
        if len(outs) == len(specs):
            spec = specs[i]
            traffic.append((dtypes.to_torch(spec.dtype), dtypes.nbytes(spec.dtype, spec.concrete_shape(env))))
        else:
            traffic.append((out.dtype, out.numel() * out.element_size()))
    return traffic


def priced_bytes(traffic: list[tuple[torch.dtype | None, int]], precision: Precision, hardware: HardwareModel) -> int:
    """Fused DRAM bytes of ``traffic`` under ``hardware``'s byte pricing.

    Each tensor counts at its own width, except that a model with ``fp32_problem_bytes`` prices the fp32
    tensors of a problem whose precision is fp32 at that many bytes per element (the leaderboard's B200 table
    prices an all-fp32 problem wholly as 16-bit: MAC rate and bytes)."""
    width = hardware.fp32_problem_bytes
    scale = width / 4 if width is not None and precision in (Precision.fp32, Precision.fp64) else 1.0
    return int(sum(n * scale if dtype == torch.float32 else n for dtype, n in traffic))


def _trace(
    definition: Definition, workload: Workload, reference: Reference, inputs: dict[str, Any], device: str
) -> tuple[GraphCounter, list[tuple[torch.dtype | None, int]]]:
    """Counts of one call and its DRAM traffic as (dtype, bytes): inputs read or written, then final outputs."""
    counter = GraphCounter()
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            counter.register_input(name, value)
    with recording(counter, device):
        returned = reference.run(*inputs.values())
    env = definition.resolve_axes(workload.axes)
    traffic: list[tuple[torch.dtype | None, int]] = [
        (u.dtype, u.read_bytes() + u.written_bytes()) for u in counter.inputs.values()
    ]
    traffic += _outputs_traffic(definition, env, returned, counter)
    return counter, traffic


def analyze_workload(
    definition: Definition,
    workload: Workload,
    hardware: HardwareModel,
    *,
    reference: Reference | None = None,
    real_device: str | None = "cpu",
    real_cap_bytes: int = DEFAULT_REAL_CAP_BYTES,
    ctx: InputContext = InputContext(),
    seed: int = 0,
) -> SolResult:
    """T_SOL of one workload on ``hardware``.

    ``real_device``: where to run the reference on real inputs when meta tracing is not possible (None: never),
    as long as its inputs take at most ``real_cap_bytes``.
    """
    reference = reference or load_reference(definition)
    method: Literal["meta", "real", "mixed"] = "meta"
    try:
        inputs = _meta_inputs(definition, workload, reference)
        counter, traffic = _trace(definition, workload, reference, inputs, "meta")
    # Any failure on meta tensors (data-dependent ops, ops with no meta kernel, reference code that inspects
    # values) is retried on real inputs below, or reported with its cause; it never yields a result.
    except Exception as meta_error:  # noqa: BLE001
        reason = f"{type(meta_error).__name__}: {_first_line(meta_error)}"
        where = f"{definition.name}/{workload.uuid}: cannot trace on meta tensors ({reason})"
        if real_device is None:
            raise SolAnalysisError(where) from meta_error
        size = _declared_input_bytes(definition, definition.resolve_axes(workload.axes))
        if size > real_cap_bytes:
            counter, traffic = _or_report(
                lambda: _mixed_trace(definition, workload, reference, real_device, real_cap_bytes, ctx, seed),
                f"{where}; its inputs ({size / 2**20:.0f} MiB) exceed the real-execution cap "
                f"({real_cap_bytes / 2**20:.0f} MiB) and the mixed trace failed too",
            )
            return _result(definition, workload, hardware, counter, traffic, "mixed")
        counter, traffic = _or_report(
            lambda: _real_trace(definition, workload, reference, real_device, ctx, seed), f"{where} nor on {real_device}"
        )
        method = "real"
    if method == "meta" and counter.data_dependent and real_device is not None:
        # What the routing reads is bounded on meta; real inputs that fit give the exact count, a mixed
        # trace the count for generated inputs (kept only when it runs: the bound stands otherwise).
        if _declared_input_bytes(definition, definition.resolve_axes(workload.axes)) <= real_cap_bytes:
            counter, traffic = _real_trace(definition, workload, reference, real_device, ctx, seed)
            method = "real"
        else:
            try:
                counter, traffic = _mixed_trace(definition, workload, reference, real_device, real_cap_bytes, ctx, seed)
                method = "mixed"
            except InputError:
                raise
            except Exception:  # noqa: BLE001, S110 - the meta bound above still holds
                pass
    return _result(definition, workload, hardware, counter, traffic, method)


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else ""


_Traced = tuple[GraphCounter, list[tuple[torch.dtype | None, int]]]


def _or_report(trace: Callable[[], _Traced], why: str) -> _Traced:
    """``trace()``; a bad input passes through, any other failure becomes a SolAnalysisError: ``why`` and its cause."""
    try:
        return trace()
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - reported with its cause
        raise SolAnalysisError(f"{why} ({type(e).__name__}: {_first_line(e)})") from e


def _real_trace(
    definition: Definition, workload: Workload, reference: Reference, device: str, ctx: InputContext, seed: int
) -> _Traced:
    with on_device(device):
        inputs = make_inputs(definition, workload, device, seed, reference=reference, ctx=ctx)
    return _trace(definition, workload, reference, inputs, device)


def _mixed_trace(
    definition: Definition, workload: Workload, reference: Reference, device: str, cap: int, ctx: InputContext, seed: int
) -> _Traced:
    """Trace with tensors above a quarter of ``cap`` and big matmuls on meta, the rest on ``device``."""
    with spilling(device, max_tensor_bytes=cap // 4, max_macs=MIXED_MAX_MACS, seed=seed):
        with on_device(device):
            inputs = make_inputs(definition, workload, device, seed, reference=reference, ctx=ctx)
        return _trace(definition, workload, reference, inputs, device)


def _result(
    definition: Definition,
    workload: Workload,
    hardware: HardwareModel,
    counter: GraphCounter,
    traffic: list[tuple[torch.dtype | None, int]],
    method: Literal["meta", "real", "mixed"],
) -> SolResult:
    precision = detect_precision(definition, counter)
    nbytes = priced_bytes(traffic, precision, hardware)
    result = roofline(definition, workload, counter.macs, nbytes, precision, hardware)
    per_input = {u.name: u.read_bytes() + u.written_bytes() for u in counter.inputs.values()}
    return result.model_copy(update={"method": method, "input_bytes": per_input})


def analyze_problem(problem: Problem, hardware: HardwareModel, **options: Any) -> list[SolResult]:
    """T_SOL of every workload of a problem (the reference is loaded once)."""
    reference = load_reference(problem.definition)
    ctx = options.pop("ctx", InputContext(problem_dir=problem.path))
    return [
        analyze_workload(problem.definition, w, hardware, reference=reference, ctx=ctx, **options)
        for w in problem.workloads
    ]


__all__ = [
    "SolAnalysisError", "SolResult", "analyze_problem", "analyze_workload", "detect_precision", "priced_bytes",
    "roofline",
]  # fmt: skip
