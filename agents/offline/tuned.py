"""What the reference's tuned candidate runs: per input signature, the fastest of a few ways of running the
reference, chosen by timing them on the first call (the way Triton's autotuner picks a config per key).

T_b is the fastest of the reference's variants per workload (eager or torch.compile, either replayed as a CUDA
graph), and which one wins changes with the size: a graph of eager's kernels on launch-bound workloads, Inductor's
fused kernels on larger ones. A candidate that is one fixed variant loses to T_b wherever another variant wins;
this one measures them on the call it is given and keeps the fastest for that signature.

The first way listed is the reference's own numerics (eager, or eager replayed as a graph) and is the check: on
the first call of a signature every other way runs on the same inputs and is kept only if it matches that one
within the problem's tolerance (the strictest of its workloads, the judge's rule: |got - want| <= atol + rtol
|want| on the required share of elements). A way that raises is left out. Inputs and the random number
generators are restored before every trial, so a reference that writes into its inputs or draws random numbers
sees the same state each time, and the call returns what the chosen way computes from the original inputs.
Ties (within ``margin``) go to the earlier way: the reference's own numerics.

On CUDA each call is timed between events after a spin kernel of about ``preroll_us`` (the judge's launch
pre-roll): the host has queued the call's work before the first event is passed, so what is measured is the
GPU's time, as the judge's CUPTI window takes it. Without it a graph's launch (15-27 µs of host on an H100)
counted: a graph of compiled code measured 30 µs against 40 for the families' graph, which run in 15 and 13.

Shipped inside candidates (as ``solforge_tuned.py``): torch only; the replay helpers are handed in.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch


@dataclass(frozen=True)
class Way:
    """One way of running the whole call: ``call(args)`` writes the outputs among ``args`` (destination-passing)
    or returns the result; ``forget(args)`` drops what it keeps for ``args`` (a captured graph) once not chosen."""

    name: str
    call: Callable[[tuple], Any]
    forget: Callable[[tuple], None] | None = None


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    matched: float  # share of elements that must be within atol + rtol * |want|


AGREE_CHUNK = 1 << 24  # elements compared at a time


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    return []


def agrees(got: Sequence[torch.Tensor], want: Sequence[torch.Tensor], tol: Tolerance) -> str | None:
    """None when every output matches, else why not."""
    if len(got) != len(want):
        return f"{len(got)} outputs, the reference gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {tuple(g.shape)} {g.dtype}, the reference gives {tuple(w.shape)} {w.dtype}"
        if g.numel() == 0:
            continue
        g_flat, w_flat, close = g.reshape(-1), w.reshape(-1), 0
        for at in range(0, g_flat.numel(), AGREE_CHUNK):  # in chunks: float64 copies of a whole output can be GiBs
            close += int(torch.isclose(g_flat[at : at + AGREE_CHUNK].double(), w_flat[at : at + AGREE_CHUNK].double(),
                                       rtol=tol.rtol, atol=tol.atol, equal_nan=True).sum())
        share = close / g_flat.numel()  # exact; a CUDA mean (sum times 1/N) can miss 1.0
        if share < tol.matched:
            return f"output {i}: {share:.4%} within atol={tol.atol} rtol={tol.rtol}"
    return None


@dataclass
class Tuned:
    """``tuned(args)``: the call by the way chosen for ``args``' signature (chosen on its first call)."""

    ways: Sequence[Way]
    n_inputs: int
    dps: bool  # destination-passing: the outputs are the arguments after the inputs
    tolerance: Tolerance
    signature: Callable[[tuple], Any]  # replay._signature
    cuda: Any = torch.cuda  # what times on the GPU (a test stands a fake in for it)
    reps: int = 7
    margin: float = 0.03  # another way must be this much faster than an earlier one to be chosen
    clock: Callable[[], float] = time.perf_counter
    preroll_us: float = 50.0
    report: Callable[[str], None] | None = None  # where each choice is told (default: the process's stderr)
    picks: dict[Any, int] = field(default_factory=dict)
    measured: dict[Any, dict[str, float | str]] = field(default_factory=dict)  # per signature: ms, or why not
    _spin_cycles: int = field(default=0, init=False)  # the pre-roll in SM cycles, measured on the first timed call

    def __call__(self, args: tuple) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        on_cuda = bool(tensors) and all(t.is_cuda for t in tensors)
        if on_cuda and self.cuda.is_current_stream_capturing():
            return self.ways[0].call(args)
        key = self.signature(args)
        if key not in self.picks:
            self.picks[key] = self._choose(args, key, on_cuda)
        return self.ways[self.picks[key]].call(args)

    def _outputs(self, args: tuple, result: Any) -> list[torch.Tensor]:
        return [t.clone() for t in (_tensors(args[self.n_inputs :]) if self.dps else _tensors(result))]

    def _choose(self, args: tuple, key: Any, on_cuda: bool) -> int:
        restore = _Restorer(args[: self.n_inputs], on_cuda, self.cuda)
        notes: dict[str, float | str] = {}
        self.measured[key] = notes
        want = self._outputs(args, self.ways[0].call(args))  # the reference's numerics; its errors are the call's
        usable = [0]
        for i, way in enumerate(self.ways[1:], start=1):
            restore()
            try:
                why = agrees(self._outputs(args, way.call(args)), want, self.tolerance)
            except Exception as e:  # noqa: BLE001 - a way that fails is left out; the reference's way stays
                why = f"{type(e).__name__}: {str(e)[:200]}"
            if why is None:
                usable.append(i)
            else:
                notes[way.name] = why
        times = dict(zip(usable, self._time_all([self.ways[i] for i in usable], args, restore, on_cuda)))
        for i, ms in times.items():
            notes[self.ways[i].name] = ms
        best = usable[0]
        for i in usable[1:]:
            if times[i] < times[best] * (1.0 - self.margin):
                best = i
        for i, way in enumerate(self.ways):
            if i != best and way.forget is not None:
                way.forget(args)
        restore()
        if on_cuda and hasattr(self.cuda, "empty_cache"):  # the ways' trial outputs and the forgotten graphs' pools
            self.cuda.empty_cache()
        self._tell(args, self.ways[best].name, notes)
        return best

    def _tell(self, args: tuple, chosen: str, notes: dict[str, float | str]) -> None:
        # One line per signature in the candidate's output (the judge keeps it in the worker's log): what a
        # judged time is made of can then be read without re-running the choice elsewhere.
        shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
        told = "; ".join(f"{k} {v:.4f} ms" if isinstance(v, float) else f"{k}: {v}" for k, v in notes.items())
        line = f"solforge tuned {shapes}: keeps {chosen}; {told}"
        if self.report is not None:
            self.report(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def _time_all(self, ways: Sequence[Way], args: tuple, restore: Callable[[], None], on_cuda: bool) -> list[float]:
        """Median ms of ``reps`` calls of each way, inputs restored before each call (outside the measured span).
        The ways take turns, one call each per round, so a passing load (another process on the GPU, a clock
        ramping up) falls on all of them alike rather than on whichever was being timed then."""
        samples: list[list[float]] = [[] for _ in ways]
        for _ in range(self.reps):
            for way, mine in zip(ways, samples):
                restore()
                mine.append(self._once(way, args, on_cuda))
        return [statistics.median(mine) for mine in samples]

    def _once(self, way: Way, args: tuple, on_cuda: bool) -> float:
        if not on_cuda:
            t0 = self.clock()
            way.call(args)
            return (self.clock() - t0) * 1e3
        self.cuda.synchronize()
        if not self._spin_cycles:
            self._spin_cycles = spin_cycles(self.cuda, self.preroll_us)
        start, end = self.cuda.Event(enable_timing=True), self.cuda.Event(enable_timing=True)
        self.cuda._sleep(self._spin_cycles)
        start.record()
        way.call(args)
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


def spin_cycles(cuda: Any, preroll_us: float) -> int:
    """SM cycles for which ``cuda._sleep`` spins about ``preroll_us`` at the clock the GPU runs at under load."""
    cuda._sleep(20_000_000)  # ~10 ms of load: an idle GPU's clock comes up first
    probe = 200_000
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    cuda._sleep(probe)
    end.record()
    end.synchronize()
    return max(1, round(probe * preroll_us / max(start.elapsed_time(end) * 1e3, 1e-3)))


class _Restorer:
    """Puts the inputs' contents and the random number generators back as they were when it was made."""

    def __init__(self, inputs: tuple, on_cuda: bool, cuda: Any):
        self.inputs = [a for a in inputs if isinstance(a, torch.Tensor)]
        self.saved = [a.clone() for a in self.inputs]
        self.cpu_rng = torch.random.get_rng_state()
        self.cuda = cuda if on_cuda else None
        self.cuda_rng = cuda.get_rng_state() if on_cuda else None

    def __call__(self) -> None:
        with torch.no_grad():
            for a, s in zip(self.inputs, self.saved):
                a.copy_(s)
        torch.random.set_rng_state(self.cpu_rng)
        if self.cuda is not None:
            self.cuda.set_rng_state(self.cuda_rng)
