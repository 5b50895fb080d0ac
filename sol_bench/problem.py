"""Load problem directories (definition.json + workload.jsonl) and solution.json files."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from . import dtypes
from .errors import DefinitionError, InputError, SolutionError, WorkloadError
from .models import Definition, Solution, Workload

DEFINITION_FILE = "definition.json"
WORKLOAD_FILE = "workload.jsonl"
WORKLOAD_PICKS = ("smallest", "spread")  # how a bench run chooses N workloads per problem


@dataclass(frozen=True)
class Problem:
    """A problem directory, loaded and checked."""

    path: Path  # the directory, resolved
    definition: Definition
    workloads: tuple[Workload, ...]

    @property
    def name(self) -> str:
        return self.definition.name

    def select(self, uuids: Sequence[str]) -> "Problem":
        """The same problem restricted to some workloads (in the given order)."""
        by_id = {w.uuid: w for w in self.workloads}
        missing = [u for u in uuids if u not in by_id]
        if missing:
            raise WorkloadError(f"no workload with uuid {missing}", file=str(self.path / WORKLOAD_FILE), field="uuid")
        return replace(self, workloads=tuple(by_id[u] for u in uuids))

    def workload_bytes(self, w: Workload) -> int:
        """Bytes of a workload's tensor inputs and outputs: a cheap proxy for its cost."""
        env = self.definition.resolve_axes(w.axes)
        total = 0
        for spec in (*self.definition.inputs.values(), *self.definition.outputs.values()):
            if spec.shape is not None:
                total += dtypes.nbytes(spec.dtype, spec.concrete_shape(env))
        return total

    def smallest_workloads(self, n: int) -> list[str]:
        """uuids of the ``n`` workloads that move the fewest bytes (for quick runs on a CPU)."""
        ranked = sorted(self.workloads, key=self.workload_bytes)
        return [w.uuid for w in ranked[: max(0, n)]]

    def spread_workloads(self, n: int) -> list[str]:
        """uuids of ``n`` workloads spread evenly over the byte ranking, smallest to largest (one: the median).

        The smallest workloads of a family are launch-bound, where every implementation takes the same
        couple of microseconds; a spread also shows the sizes where kernels differ."""
        ranked = sorted(self.workloads, key=self.workload_bytes)
        if n <= 0 or not ranked:
            return []
        if n >= len(ranked):
            return [w.uuid for w in ranked]
        if n == 1:
            return [ranked[(len(ranked) - 1) // 2].uuid]
        picks = sorted({round(i * (len(ranked) - 1) / (n - 1)) for i in range(n)})
        return [ranked[i].uuid for i in picks]

    def pick_workloads(self, n: int, how: str = "smallest") -> list[str]:
        """``smallest_workloads(n)`` or ``spread_workloads(n)``, by name (one of ``WORKLOAD_PICKS``)."""
        if how not in WORKLOAD_PICKS:
            raise ValueError(f"unknown workload pick {how!r}: one of {', '.join(WORKLOAD_PICKS)}")
        return self.smallest_workloads(n) if how == "smallest" else self.spread_workloads(n)


def _field(err: ValidationError) -> str:
    e = err.errors()[0]
    return ".".join(str(p) for p in e["loc"]) or "(root)"


def _message(err: ValidationError) -> str:
    e = err.errors()[0]
    msg = e["msg"]
    return msg.removeprefix("Value error, ")


def _read_json(path: Path, exc: type) -> object:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise exc("file not found", file=str(path)) from None
    except OSError as e:
        raise exc(f"cannot read: {e.strerror}", file=str(path)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise exc(f"malformed JSON (line {e.lineno}, column {e.colno}): {e.msg}", file=str(path)) from None


_Model = TypeVar("_Model", bound=BaseModel)


def _validate(model: type[_Model], data: object, exc: type[InputError], where: str) -> _Model:
    """``data`` as a ``model``; a validation error becomes ``exc`` naming ``where`` and the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise exc(_message(e), file=where, field=_field(e)) from None


def load_definition(path: Path) -> Definition:
    path = Path(path)
    return _validate(Definition, _read_json(path, DefinitionError), DefinitionError, str(path))


def load_workloads(path: Path, definition: Definition) -> tuple[Workload, ...]:
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise WorkloadError("file not found", file=str(path)) from None
    out: list[Workload] = []
    seen: set[str] = set()
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{i}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise WorkloadError(f"malformed JSON: {e.msg}", file=where) from None
        w = _validate(Workload, data, WorkloadError, where)
        if w.uuid in seen:
            raise WorkloadError(f"duplicate uuid {w.uuid!r}", file=where, field="uuid")
        seen.add(w.uuid)
        w = without_unknown_names(definition, w)
        check_workload(definition, w, where)
        out.append(w)
    if not out:
        raise WorkloadError("no workloads", file=str(path))
    return tuple(out)


def without_unknown_names(definition: Definition, w: Workload) -> Workload:
    """The workload without axes and inputs the definition does not name. Upstream builds a workload's inputs
    by walking the definition, so real datasets carry such extras (a model-level flag as an axis, inputs of a
    sibling variant) and its harness runs them: dropping them is the compatible reading."""
    axes = {k: v for k, v in w.axes.items() if k in definition.axes}
    inputs = {k: v for k, v in w.inputs.items() if k in definition.inputs}
    if len(axes) == len(w.axes) and len(inputs) == len(w.inputs):
        return w
    return w.model_copy(update={"axes": axes, "inputs": inputs})


def check_workload(definition: Definition, w: Workload, where: str) -> None:
    """A workload must bind every var axis, give scalars a value, and satisfy the constraints (axes and inputs
    the definition does not name are dropped before this check, ``without_unknown_names``)."""
    missing = set(definition.var_axes()) - set(w.axes)
    if missing:
        raise WorkloadError(f"var axes without a value: {sorted(missing)}", file=where, field="axes")
    for name, spec in definition.inputs.items():
        src = w.inputs.get(name)
        if spec.is_scalar and (src is None or src.type not in ("scalar", "custom")):
            if definition.custom_inputs_entrypoint is None:
                raise WorkloadError(
                    f"scalar input {name!r} needs a value ({{'type': 'scalar', 'value': ...}})",
                    file=where,
                    field=f"inputs.{name}",
                )
    if any(s.type == "custom" for s in w.inputs.values()) and not definition.custom_inputs_entrypoint:
        raise WorkloadError(
            "custom inputs but the definition has no custom_inputs_entrypoint", file=where, field="inputs"
        )
    try:
        definition.resolve_axes(w.axes)
    except ValueError as e:
        raise WorkloadError(str(e), file=where, field="axes") from None


def load_problem(directory: Path) -> Problem:
    directory = Path(directory)
    if not directory.is_dir():
        raise DefinitionError("not a directory", file=str(directory))
    definition = load_definition(directory / DEFINITION_FILE)
    workloads = load_workloads(directory / WORKLOAD_FILE, definition)
    return Problem(path=directory.resolve(), definition=definition, workloads=workloads)


def find_problems(root: Path) -> list[Path]:
    """Every problem directory at or below ``root`` (a dataset may nest them under category folders)."""
    root = Path(root)
    if (root / DEFINITION_FILE).is_file():
        return [root]
    return sorted(p.parent for p in root.rglob(DEFINITION_FILE))


def load_solution(path: Path) -> Solution:
    path = Path(path)
    return _validate(Solution, _read_json(path, SolutionError), SolutionError, str(path))
