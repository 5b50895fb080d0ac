"""Typed records of the SOL-ExecBench formats: Definition, Workload, Solution and Trace.

Compatible with the public files: unknown keys are ignored, field names follow the upstream schema.
Our own additions to a trace live under ``evaluation`` and are optional.
"""

from __future__ import annotations

import ast
import re
from datetime import datetime, timezone
from enum import Enum
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import axes as axes_expr
from .dtypes import DType


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# ---------------------------------------------------------------------------------------- definition


class ConstAxis(_Model):
    type: Literal["const"] = Field(description="A fixed size.")
    value: int = Field(description="The size.", ge=0)


class VarAxis(_Model):
    type: Literal["var"] = Field(description="A size each workload binds.")


class ExprAxis(_Model):
    type: Literal["expr"] = Field(description="A size computed from other axes.")
    expression: str = Field(description="Integer arithmetic over other axis names, e.g. 'H // 2'.")

    @field_validator("expression")
    @classmethod
    def _parses(cls, v: str) -> str:
        axes_expr.parse(v)
        return v


Axis = Annotated[Union[ConstAxis, VarAxis, ExprAxis], Field(discriminator="type")]

_DIGITS = re.compile(r"^[0-9]+$")


class TensorSpec(_Model):
    shape: list[str | int] | None = Field(
        description="Axis names or literal sizes; [] is a 0-d tensor; null is a Python scalar."
    )
    dtype: DType = Field(description="Element type, in the format's names.")
    description: str | None = Field(default=None, description="Free text.")

    @property
    def is_scalar(self) -> bool:
        return self.shape is None

    def concrete_shape(self, env: dict[str, int]) -> tuple[int, ...]:
        out = []
        for d in self.shape or []:
            if isinstance(d, int):
                out.append(d)
            elif _DIGITS.match(d):
                out.append(int(d))
            else:
                out.append(env[d])
        return tuple(out)


class Definition(_Model):
    name: str = Field(description="Unique problem name.", min_length=1)
    op_type: str | None = Field(default=None, description="Operator family, e.g. 'rmsnorm'.")
    description: str | None = Field(default=None, description="What the problem computes.")
    hf_id: str | list[str] | None = Field(default=None, description="Source model(s).")
    axes: dict[str, Axis] = Field(description="Axis name -> const | var | expr.")
    inputs: dict[str, TensorSpec] = Field(description="Ordered input name -> spec; order = run() parameters.")
    outputs: dict[str, TensorSpec] = Field(description="Ordered output name -> spec.")
    reference: str = Field(description="Python source defining a top-level run(...).")
    custom_inputs_entrypoint: str | None = Field(
        default=None, description="Function in the reference that makes inputs: fn(axes_and_scalars, device)."
    )
    constraints: list[str] = Field(default_factory=list, description="Expressions over axes that must hold.")
    tags: list[str] = Field(default_factory=list, description="Free labels.")

    @model_validator(mode="after")
    def _consistent(self) -> "Definition":
        known = set(self.axes)
        for name, ax in self.axes.items():
            if ax.type == "expr":
                missing = axes_expr.names(ax.expression) - known
                if missing:
                    raise ValueError(f"axes.{name}: expression uses undefined axis {sorted(missing)}")
        for group in ("inputs", "outputs"):
            for tname, spec in getattr(self, group).items():
                for d in spec.shape or []:
                    if isinstance(d, str) and not _DIGITS.match(d) and d not in known:
                        raise ValueError(f"{group}.{tname}.shape: undefined axis {d!r}")
        overlap = set(self.inputs) & set(self.outputs)
        if overlap:
            raise ValueError(f"outputs: names also used as inputs: {sorted(overlap)}")
        for c in self.constraints:
            _parse_constraint(c, known)
        self._check_reference()
        return self

    def _check_reference(self) -> None:
        try:
            tree = ast.parse(self.reference)
        except SyntaxError as e:
            raise ValueError(f"reference: not valid Python ({e.msg}, line {e.lineno})") from e
        funcs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        run = funcs.get("run")
        if run is None:
            raise ValueError("reference: defines no top-level run(...)")
        params = [a.arg for a in run.args.posonlyargs + run.args.args]
        if params != list(self.inputs):
            raise ValueError(f"reference: run{tuple(params)} does not match the inputs {tuple(self.inputs)}")
        if self.custom_inputs_entrypoint and self.custom_inputs_entrypoint not in funcs:
            raise ValueError(
                f"custom_inputs_entrypoint: {self.custom_inputs_entrypoint!r} is not defined in the reference"
            )

    def var_axes(self) -> list[str]:
        return [n for n, a in self.axes.items() if a.type == "var"]

    def resolve_axes(self, workload_axes: dict[str, int]) -> dict[str, int]:
        env = axes_expr.resolve(self.axes, workload_axes)
        for c in self.constraints:
            if not check_constraint(c, env):
                raise ValueError(f"constraint {c!r} does not hold for axes {env}")
        return env


_CMP = re.compile(r"^(.*?)(==|!=|<=|>=|<|>)(.*)$")


def _parse_constraint(c: str, known: set[str]) -> tuple[str, str, str]:
    m = _CMP.match(c)
    if not m:
        raise ValueError(f"constraints: {c!r} is not a comparison")
    left, op, right = (s.strip() for s in m.groups())
    for side in (left, right):
        bad = axes_expr.names(side) - known
        if bad:
            raise ValueError(f"constraints: {c!r} uses undefined axis {sorted(bad)}")
    return left, op, right


def check_constraint(c: str, env: dict[str, int]) -> bool:
    left, op, right = _parse_constraint(c, set(env))
    a, b = axes_expr.evaluate(left, env), axes_expr.evaluate(right, env)
    return {"==": a == b, "!=": a != b, "<=": a <= b, ">=": a >= b, "<": a < b, ">": a > b}[op]


# ------------------------------------------------------------------------------------------ workload


class RandomInput(_Model):
    type: Literal["random"] = Field(description="Drawn by the judge.")


class ScalarInput(_Model):
    type: Literal["scalar"] = Field(description="A fixed Python scalar.")
    value: int | float | bool = Field(description="The scalar.")


class CustomInput(_Model):
    type: Literal["custom"] = Field(description="Made by the reference's custom_inputs_entrypoint.")


class SafetensorsInput(_Model):
    type: Literal["safetensors"] = Field(description="Loaded from a safetensors file.")
    path: str = Field(description="Relative to the problem dir or the configured data root.")
    tensor_key: str = Field(description="Key inside the file.")


InputSource = Annotated[
    Union[RandomInput, ScalarInput, CustomInput, SafetensorsInput], Field(discriminator="type")
]


class Tolerance(_Model):
    max_atol: float = Field(default=1e-2, ge=0, description="Absolute tolerance.")
    max_rtol: float = Field(default=1e-2, ge=0, description="Relative tolerance.")
    required_matched_ratio: float = Field(default=0.99, ge=0, le=1, description="Fraction that must match.")
    max_error_cap: float | None = Field(default=None, description="If set, no element may be off by more.")
    allow_negative_inf: bool = Field(default=False, description="-inf in the reference may be matched by -inf.")


class Workload(_Model):
    uuid: str = Field(description="Unique id of this workload.", min_length=1)
    axes: dict[str, int] = Field(default_factory=dict, description="Var axis -> size.")
    inputs: dict[str, InputSource] = Field(default_factory=dict, description="Input name -> source.")
    tolerance: Tolerance = Field(default_factory=Tolerance, description="Correctness tolerance.")


# ------------------------------------------------------------------------------------------ solution


class Language(str, Enum):
    pytorch = "pytorch"
    triton = "triton"
    cute_dsl = "cute_dsl"
    cutile = "cutile"
    cudnn_frontend = "cudnn_frontend"
    python = "python"
    cuda_cpp = "cuda_cpp"
    cutlass = "cutlass"
    cudnn = "cudnn"
    cublas = "cublas"
    cpp = "cpp"


PYTHON_FAMILY = frozenset(
    {Language.pytorch, Language.triton, Language.cute_dsl, Language.cutile, Language.cudnn_frontend, Language.python}
)
CPP_FAMILY = frozenset({Language.cuda_cpp, Language.cutlass, Language.cudnn, Language.cublas, Language.cpp})


class CompileOptions(_Model):
    cflags: list[str] = Field(default_factory=list, description="Extra host compiler flags.")
    cuda_cflags: list[str] = Field(default_factory=list, description="Extra nvcc flags.")
    ld_flags: list[str] = Field(default_factory=list, description="Extra linker flags.")


class BuildSpec(_Model):
    languages: list[Language] = Field(description="Languages used; Python and C++ families do not mix.")
    target_hardware: list[str] = Field(default_factory=lambda: ["LOCAL"], description="e.g. ['H200'].")
    entry_point: str = Field(description="'file::function'.")
    destination_passing_style: bool = Field(
        default=True, description="True: outputs are preallocated and passed after the inputs."
    )
    compile_options: CompileOptions = Field(default_factory=CompileOptions, description="Build flags.")
    dependencies: list[str] = Field(default_factory=list, description="Declared extra packages.")

    @model_validator(mode="before")
    @classmethod
    def _upstream_aliases(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "languages" not in data and "language" in data:
                lang = data.pop("language")
                data["languages"] = lang if isinstance(lang, list) else [lang]
            th = data.get("target_hardware")
            if isinstance(th, str):
                data["target_hardware"] = [th]
        return data

    @model_validator(mode="after")
    def _check(self) -> "BuildSpec":
        if not self.languages:
            raise ValueError("languages: at least one language is required")
        langs = set(self.languages)
        if langs & PYTHON_FAMILY and langs & CPP_FAMILY:
            raise ValueError(f"languages: Python and C++ families do not mix: {sorted(l.value for l in langs)}")
        if "::" not in self.entry_point:
            raise ValueError(f"entry_point: {self.entry_point!r} is not 'file::function'")
        file, func = self.entry_point.rsplit("::", 1)
        if not file or not func.isidentifier():
            raise ValueError(f"entry_point: {self.entry_point!r} is not 'file::function'")
        return self

    @property
    def is_cpp(self) -> bool:
        return bool(set(self.languages) & CPP_FAMILY)

    @property
    def entry_file(self) -> str:
        return self.entry_point.rsplit("::", 1)[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.rsplit("::", 1)[1]


class SourceFile(_Model):
    path: str = Field(description="Relative path inside the solution.")
    content: str = Field(description="File text.")

    @field_validator("path")
    @classmethod
    def _safe(cls, v: str) -> str:
        if not v or v.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", v):
            raise ValueError(f"{v!r} must be a relative path")
        parts = re.split(r"[\\/]", v)
        if any(p in ("..", "") for p in parts):
            raise ValueError(f"{v!r} must not contain '..' or empty parts")
        if any(p.startswith(".") for p in parts):
            raise ValueError(f"{v!r} must not contain hidden files")
        return v


class Solution(_Model):
    name: str = Field(description="Solution name.", min_length=1)
    definition: str = Field(description="Name of the problem it solves.")
    author: str = Field(default="unknown", description="Who or what wrote it.")
    description: str | None = Field(default=None, description="Free text.")
    spec: BuildSpec = Field(description="How to build and call it.")
    sources: list[SourceFile] = Field(description="Its files.", min_length=1)

    @model_validator(mode="after")
    def _check(self) -> "Solution":
        paths = [s.path for s in self.sources]
        dup = {p for p in paths if paths.count(p) > 1}
        if dup:
            raise ValueError(f"sources: duplicate paths {sorted(dup)}")
        if self.spec.entry_file not in paths:
            raise ValueError(f"spec.entry_point: file {self.spec.entry_file!r} is not among the sources")
        return self


# --------------------------------------------------------------------------------------------- trace


class Status(str, Enum):
    PASSED = "PASSED"
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    COMPILE_ERROR = "COMPILE_ERROR"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"
    INVALID_REFERENCE = "INVALID_REFERENCE"


class Environment(_Model):
    hardware: str = Field(description="Device name, e.g. 'NVIDIA H200' or 'cpu'.")
    libs: dict[str, str] = Field(default_factory=dict, description="Library name -> version.")
    sandbox: str | None = Field(default=None, description="How the candidate's writes were confined.")


class Correctness(_Model):
    max_relative_error: float = Field(description="Largest |out-ref|/|ref| over compared elements.")
    max_absolute_error: float = Field(description="Largest |out-ref|.")
    has_nan: bool = Field(default=False, description="The output held a NaN.")
    has_inf: bool = Field(default=False, description="The output held an unmatched Inf.")
    matched_ratio: float | None = Field(default=None, description="Fraction of elements within tolerance.")
    rounds: int | None = Field(default=None, description="Correctness rounds with fresh inputs.")
    timed_runs_checked: int | None = Field(default=None, description="Timed iterations whose outputs were verified.")


class Performance(_Model):
    latency_ms: float = Field(description="Median latency of the candidate.", gt=0)
    reference_latency_ms: float = Field(description="Median latency of the reference, same protocol.", gt=0)
    speedup_factor: float = Field(description="reference_latency_ms / latency_ms.", gt=0)
    latency_iqr_ms: float | None = Field(default=None, description="Interquartile range of the candidate's latency.")
    reference_iqr_ms: float | None = Field(default=None, description="Interquartile range of the reference.")
    iterations: int | None = Field(default=None, description="Timed iterations.")
    timing_method: str | None = Field(default=None, description="How time was measured.")
    sm_clock_mhz: float | None = Field(default=None, description="SM clock read during timing (NVML).")
    host_bound_fraction: float | None = Field(
        default=None,
        description="CUDA: share of timed calls whose host launching outlasted the launch pre-roll, so that the "
        "window also holds host time.",
    )
    reference_host_bound_fraction: float | None = Field(default=None, description="The same for the reference.")


class Evaluation(_Model):
    status: Status = Field(description="The verdict.")
    log: str = Field(default="", description="What the judge and the candidate printed, trimmed.")
    environment: Environment = Field(description="Where it ran.")
    timestamp: str = Field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat(), description="ISO 8601, UTC."
    )
    correctness: Correctness | None = Field(default=None, description="Present when numbers were compared.")
    performance: Performance | None = Field(default=None, description="Present when PASSED.")
    # solforge extras
    reason: str | None = Field(default=None, description="One line on why it failed (for REWARD_HACK, the class).")
    seed: int | None = Field(default=None, description="Input seed: replay with --seed.")
    device: str | None = Field(default=None, description="torch device string used.")
    phase_seconds: dict[str, float] = Field(default_factory=dict, description="Judge wall seconds per phase.")
    t_sol_ms: float | None = Field(default=None, description="Speed-of-light time of this workload, if analysed.")
    sol_hardware: str | None = Field(default=None, description="Hardware model T_SOL was computed for.")

    @model_validator(mode="after")
    def _passed_is_complete(self) -> "Evaluation":
        if self.status is Status.PASSED and (self.correctness is None or self.performance is None):
            raise ValueError("a PASSED evaluation needs correctness and performance")
        return self


class Trace(_Model):
    definition: str = Field(description="Problem name.")
    solution: str = Field(description="Solution name.")
    workload: Workload = Field(description="The workload, echoed.")
    evaluation: Evaluation = Field(description="The verdict and its evidence.")
