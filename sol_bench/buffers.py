"""One workload's buffer sets shared with a worker process, and the checks made on them.

The judge keeps two sets of input and output buffers per worker (rotated between calls), refills their
inputs with fresh content, poisons the outputs before every call, and checks what a call wrote against the
reference computed on a private copy of the inputs. The worker only ever receives inputs and output
buffers, never a reference output.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from .correctness import Comparison, compare, first_mismatches
from .errors import CandidateTimeout, ReferenceFailure, RewardHack, WrongNumbers
from .inputs import InputContext, make_inputs, output_specs, sub_seed
from .models import Definition, Workload
from .reference import Reference
from .runner import Worker
from .shared import SharedArena

N_SETS = 2  # buffer sets rotated between calls, so consecutive calls see different addresses


@dataclass
class BufferSet:
    """One input/output buffer set shared with the worker."""

    inputs: list[Any]
    outputs: list[torch.Tensor]


@dataclass
class ErrorStats:
    """The worst error statistics over every check that passed."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    matched: float = 1.0  # the lowest matched ratio
    rounds: int = 0  # correctness rounds passed
    timed_checked: int = 0  # timed calls whose outputs passed a check

    def add(self, c: Comparison) -> None:
        self.max_abs = max(self.max_abs, c.max_absolute_error)
        self.max_rel = max(self.max_rel, c.max_relative_error)
        self.matched = min(self.matched, c.matched_ratio)


@dataclass(frozen=True)
class Check:
    """What one checked call is compared with: its inputs as they were before the call, and the reference's
    outputs on a private copy of them."""

    inputs: list[Any]
    expected: list[torch.Tensor]


@dataclass(frozen=True)
class Subject:
    """The problem and device a workload is judged on (trusted data of the judge's process)."""

    definition: Definition
    reference: Reference
    device: torch.device
    input_ctx: InputContext
    arena: SharedArena


def clone_all(xs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def poison(t: torch.Tensor) -> None:
    """Fill an output buffer with values no honest call leaves behind (NaN, or random bytes)."""
    if t.is_floating_point() and t.element_size() >= 2:
        t.fill_(float("nan"))
    else:
        t.view(torch.uint8).random_(0, 256) if t.dtype != torch.bool else t.random_(0, 2)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    # reshape(-1): a 0-d tensor cannot be viewed as bytes
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def reference_outputs(subject: Subject, w: Workload, inputs: list[Any]) -> list[torch.Tensor]:
    names = list(subject.definition.outputs)
    specs = output_specs(subject.definition, w)
    try:
        with torch.no_grad():
            out = subject.reference.run(*inputs)
    except Exception as e:
        raise ReferenceFailure(f"reference raised {type(e).__name__}: {e}") from e
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(names):
        raise ReferenceFailure(f"reference returned {len(outs)} outputs, the definition has {len(names)}")
    result = []
    for name, o in zip(names, outs):
        if not isinstance(o, torch.Tensor):
            o = torch.tensor(o, device=subject.device)
        shape, dtype = specs[name]
        if tuple(o.shape) != tuple(shape) or o.dtype != dtype:
            raise ReferenceFailure(
                f"reference output {name!r} is {tuple(o.shape)} {o.dtype}, the definition says {tuple(shape)} {dtype}"
            )
        result.append(o)
    return result


@dataclass
class WorkloadBuffers:
    """The buffer sets of one workload registered with one worker, and the checks of its calls."""

    subject: Subject
    w: Workload
    worker: Worker
    seed: int
    deadline: float
    timeout_s: float
    sets: list[BufferSet] = field(default_factory=list)
    stats: ErrorStats = field(default_factory=ErrorStats)
    known_good: Check | None = None  # inputs of the last passed correctness round, for the timed recheck
    known_good_set: int = 0  # the buffer set that round ran in
    log: list[str] = field(default_factory=list)  # lines for the trace's log

    def __post_init__(self) -> None:
        self.specs = output_specs(self.subject.definition, self.w)

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CandidateTimeout(f"workload exceeded {self.timeout_s:.0f} s")
        return left

    def request(self, msg: tuple) -> list:
        return self.worker.request(msg, self.remaining())

    def fresh_inputs(self, seed: int) -> list[Any]:
        s = self.subject
        return list(make_inputs(s.definition, self.w, s.device, seed, s.reference, s.input_ctx).values())

    def _share(self, x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        buf = self.subject.arena.alloc(tuple(x.shape), x.dtype)
        buf.copy_(x)
        return buf

    def _register(self, j: int) -> None:
        arena, s = self.subject.arena, self.sets[j]
        self.request(("register", j, [arena.wire(x) for x in s.inputs], [arena.wire(o) for o in s.outputs]))

    def add_sets(self, n: int = N_SETS) -> None:
        for j in range(n):
            inputs = [self._share(x) for x in self.fresh_inputs(sub_seed(self.seed, "set", j))]
            outputs = [self.subject.arena.alloc(tuple(shape), dtype) for shape, dtype in self.specs.values()]
            self.sets.append(BufferSet(inputs, outputs))
            self._register(j)

    def load(self, j: int, new: list[Any]) -> None:
        """Put ``new`` into set ``j``'s inputs and poison its outputs (untimed preparation of a call)."""
        s = self.sets[j]
        if any(isinstance(b, torch.Tensor) and (b.shape != n.shape or b.dtype != n.dtype) for b, n in zip(s.inputs, new)):
            s.inputs = [self._share(x) for x in new]  # custom inputs whose shapes vary: new buffers
            self._register(j)
        else:
            s.inputs = [b.copy_(n) if isinstance(b, torch.Tensor) else b for b, n in zip(s.inputs, new)]
        for o in s.outputs:
            poison(o)

    def refill(self, j: int, seed: int) -> None:
        self.load(j, self.fresh_inputs(seed))

    def sync(self) -> None:
        if self.subject.device.type == "cuda":
            torch.cuda.synchronize(self.subject.device)

    def snapshot(self, j: int) -> tuple[list[Any], list[torch.Tensor]]:
        """Copies of set ``j``'s inputs and outputs as they are now, for a check made later."""
        s = self.sets[j]
        return clone_all(s.inputs), [o.clone() for o in s.outputs]

    def prepare_check(self, j: int) -> Check:
        saved = clone_all(self.sets[j].inputs)
        return Check(saved, reference_outputs(self.subject, self.w, clone_all(saved)))

    def check(self, j: int, expected: Check, seen: tuple[list[Any], list[torch.Tensor]] | None = None) -> None:
        """Inputs unchanged and outputs right: set ``j``'s buffers, or ``seen`` (a ``snapshot`` of them).
        Raises RewardHack for a modified input, WrongShape / WrongDtype / WrongNumbers for wrong outputs."""
        s = self.sets[j]
        inputs, outputs = seen if seen is not None else (s.inputs, s.outputs)
        for name, b, c in zip(self.subject.definition.inputs, inputs, expected.inputs):
            if isinstance(b, torch.Tensor) and not same_bits(b, c):
                raise RewardHack(f"input {name!r} was modified by the candidate")
        for name, o, r in zip(self.specs, outputs, expected.expected):
            try:
                c = compare(name, o, r, self.w.tolerance)
            except WrongNumbers as e:
                detail = "\n".join(first_mismatches(o, r, self.w.tolerance))
                raise WrongNumbers(f"{e}\nfirst mismatches:\n{detail}" if detail else str(e), e.stats) from None
            self.stats.add(c)

    def untimed_call(self, j: int, expected: Check, inputs: list[Any] | None = None) -> None:
        """One call under the correctness protocol (``("call", j)``: no timer, fresh poisoned outputs), on
        ``inputs`` when given (a replay) or on what set ``j`` holds, then checked against ``expected``."""
        if inputs is not None:
            self.load(j, clone_all(inputs))
        self.sync()
        self.request(("call", j))
        self.check(j, expected)


def correctness_rounds(buf: WorkloadBuffers, rounds: int) -> None:
    """Fresh inputs each round, checked untimed; the last passed round is kept for the timed recheck."""
    for r in range(max(1, rounds)):
        j = r % len(buf.sets)
        buf.refill(j, sub_seed(buf.seed, "round", r))
        expected = buf.prepare_check(j)
        buf.untimed_call(j, expected)
        buf.stats.rounds += 1
        buf.known_good, buf.known_good_set = expected, j

