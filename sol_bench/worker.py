"""Entry of the candidate process: the only process where candidate code runs.

Order matters: confine the process (Landlock) while it is still single-threaded, import torch, capture
the timing primitives, and only then import the candidate. The judge talks to this process over one
socket; it never sends reference outputs, and it checks every answer itself (outputs in its own memory,
times against its own clock), so a forged reply can make a candidate fail but not pass.

Messages (judge -> worker -> judge):
    (replies are JSON arrays; requests are pickled, since the judge's data is trusted here)
    ("load",)                          -> ("ok", info) | ("fail", kind, text)
    ("register", j, inputs, outputs)   -> ("ok",)         tensors shared with the judge's memory (with
                                                          --buffers private, copied in and out around calls)
    ("call", j)                        -> ("ok",) | ("fail", kind, text)
    ("time", j[, timer])               -> ("timed", ms, ms_until_idle, flags) | ("fail", kind, text)
    ("time_noop"[, timer])             -> ("timed", ...)  the same path, nothing called (calibration)
                                          timer: "events" under --timer cupti (the judge's re-timing), else
                                          the --timer one
    ("exit",)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from . import sandbox
from .affinity import parse_cpulist


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sol_bench.worker")
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--staging", type=Path, required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--entry-file", required=True)
    p.add_argument("--function", required=True)
    p.add_argument("--dps", choices=("0", "1"), required=True)
    p.add_argument("--module-path", default="")
    p.add_argument("--preroll-us", type=float, default=0.0, help="CUDA launch pre-roll (see sol_bench.timing)")
    p.add_argument("--preroll-kind", choices=("stream", "device"), default="stream")
    p.add_argument("--timer", choices=("events", "cupti"), default="events", help="see sol_bench.timing.TIMERS")
    p.add_argument("--cpus", default="", help="CPU list to run on (the GPU's local CPUs, see sol_bench.affinity)")
    p.add_argument("--buffers", choices=BUFFER_MODES, default="shared", help="see BufferSets")
    return p.parse_args()


BUFFER_MODES = ("shared", "private")


class BufferSets:
    """The candidate's arguments for each registered set ``j``: the judge's shared tensors, or copies of them.

    ``private``: the candidate reads and writes tensors of this process's own allocator, as the reference
    does when T_b is timed, rather than the judge's memory mapped in through CUDA IPC (one compiled call read
    a 2 MB kernel's IPC buffers 0.14 µs slower, bench/ipc_offset.py; judged, the 16 bundled rows read alike
    either way, bench/buffers_ab.py: the judge's default stays ``shared``). ``stage(j)`` copies the
    judge's inputs and (poisoned) outputs in before a call, outside any timed window; ``publish(j)`` copies
    the outputs and the inputs back after it, so the judge's own checks still see what the call wrote, an
    input it modified included. The caller synchronises the device around both.
    """

    def __init__(self, mode: str) -> None:
        if mode not in BUFFER_MODES:
            raise ValueError(f"buffers: {mode!r} is not one of {', '.join(BUFFER_MODES)}")
        self.private = mode == "private"
        self.shared: dict[int, tuple[list, list]] = {}
        self.own: dict[int, tuple[list, list]] = {}

    def register(self, j: int, inputs: list, outputs: list) -> None:
        import torch

        self.shared[j] = (inputs, outputs)
        if self.private:
            def copy(x):  # same shape, dtype, device and (dense) strides
                return torch.empty_like(x) if isinstance(x, torch.Tensor) else x

            self.own[j] = ([copy(x) for x in inputs], [copy(o) for o in outputs])

    def args(self, j: int) -> tuple[list, list]:
        """(inputs, outputs) the candidate is called with."""
        return self.own[j] if self.private else self.shared[j]

    def stage(self, j: int) -> None:
        if self.private:
            self._copy(self.shared[j], self.own[j])

    def publish(self, j: int) -> None:
        if self.private:
            self._copy(self.own[j], self.shared[j])

    @staticmethod
    def _copy(src: tuple[list, list], dst: tuple[list, list]) -> None:
        import torch

        for a, b in zip(src[0] + src[1], dst[0] + dst[1]):
            if isinstance(a, torch.Tensor):
                b.copy_(a)


class _Persisting:
    """The persisting-L2 set-aside (a way to pin data in L2 across timed calls): zeroed, read, reset."""

    def __init__(self) -> None:
        try:
            from cuda.bindings import runtime as rt
        except ImportError:
            rt = None
        self.rt = rt

    def zero(self) -> bool:
        """Set the set-aside to 0 bytes (no line can persist until a candidate raises it). False where the
        driver refused or cuda-python is missing; the caller then resets before every timed call."""
        if self.rt is None:
            return False
        (err,) = self.rt.cudaDeviceSetLimit(self.rt.cudaLimit.cudaLimitPersistingL2CacheSize, 0)
        return int(err) == 0 and self.pinned_bytes() == 0

    def reset(self) -> None:
        if self.rt is not None:
            self.rt.cudaCtxResetPersistingL2Cache()

    def pinned_bytes(self) -> int:
        if self.rt is None:
            return 0
        err, value = self.rt.cudaDeviceGetLimit(self.rt.cudaLimit.cudaLimitPersistingL2CacheSize)
        return int(value) if int(err) == 0 else 0


def _load_entry(args: argparse.Namespace):
    import importlib.machinery
    import importlib.util

    src = args.staging / "src"
    if args.module_path:
        loader = importlib.machinery.ExtensionFileLoader(Path(args.module_path).stem.split(".")[0], args.module_path)
        spec = importlib.util.spec_from_loader(loader.name, loader)
    else:
        sys.path.append(str(src))  # last: candidate files never shadow installed packages
        entry = src / args.entry_file
        name = "solution_" + Path(args.entry_file).with_suffix("").as_posix().replace("/", "_").replace(".", "_")
        spec = importlib.util.spec_from_file_location(name, entry)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, args.function, None)
    if not callable(fn):
        raise AttributeError(f"entry point function {args.function!r} not found in {args.entry_file}")
    return fn


def _kind(e: BaseException) -> str:
    name = type(e).__name__
    if isinstance(e, SyntaxError) or "CompilationError" in name or "CompileError" in name:
        return "compile"
    return "runtime"


def _tail(e: BaseException) -> str:
    return "".join(traceback.format_exception(e))[-4000:]


def main() -> None:
    args = _parse()
    if args.cpus:  # first, so every thread the process starts later inherits it
        os.sched_setaffinity(0, parse_cpulist(args.cpus))
    staging = args.staging.resolve()
    run = staging / "run"
    desc = sandbox.apply(sandbox.SandboxPolicy(writable=(run, staging / "build", Path("/dev/shm"))))

    import time

    import torch
    import torch.multiprocessing  # noqa: F401 - registers the CUDA IPC rebuild functions for unpickling

    from .shared import attach
    from .timing import L2Flusher, make_cuda_timer

    from multiprocessing.connection import Connection

    torch.set_grad_enabled(False)  # like the reference: no autograd bookkeeping in timed calls
    conn = Connection(args.fd)

    def reply(*parts) -> None:
        # JSON, never pickle: the judge must not unpickle anything this process produces.
        conn.send_bytes(json.dumps(parts).encode())
    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    if on_cuda:
        torch.cuda.set_device(device)
    flusher = L2Flusher(device) if on_cuda else None
    timer = make_cuda_timer(device, args.timer, args.preroll_us, args.preroll_kind) if on_cuda else None
    # Under the CUPTI window the event timer too: the judge re-times a call whose window its clock disputes.
    events = None
    if on_cuda and args.timer == "cupti":
        events = make_cuda_timer(device, "events", args.preroll_us, args.preroll_kind)
    persisting = _Persisting() if on_cuda else None
    # With no set-aside nothing persists, and a candidate that sets one aside is caught by the size check
    # after each timed call. That spares a driver call before every timed call (resetting persisting lines
    # raised a Triton candidate's host time per call in 2 of 3 runs of bench/worker_launch_diag.py, msg vs
    # msg+reset); the reset is the fallback where the set-aside cannot be zeroed, and then only growth
    # after load counts.
    reset_each_call = on_cuda and not persisting.zero()
    pinned_before = persisting.pinned_bytes() if on_cuda else 0
    # Bound methods taken now: patching CudaTimer / L2Flusher / _Persisting after load cannot reach them.
    if on_cuda:
        timed, flush, reset_l2, pinned = timer.time, flusher.flush, persisting.reset, persisting.pinned_bytes
        timers = {args.timer: timed} | ({"events": events.time} if events is not None else {})
    exact_tensor = torch.Tensor
    perf = time.perf_counter
    dps = args.dps == "1"
    sets = BufferSets(args.buffers)
    stage, publish, candidate_args = sets.stage, sets.publish, sets.args
    fn = None

    def invoke(j: int):
        inputs, outputs = candidate_args(j)
        if dps:
            fn(*inputs, *outputs)
            return None
        return fn(*inputs)

    def deliver(j: int, result) -> str | None:
        """Non-DPS: copy returned tensors into the candidate's output buffers. Returns a failure kind or None."""
        if dps:
            return None
        outputs = candidate_args(j)[1]
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(results) != len(outputs):
            raise _Fail("shape", f"returned {len(results)} outputs, expected {len(outputs)}")
        for i, (r, o) in enumerate(zip(results, outputs)):
            if type(r) is not exact_tensor:
                raise _Fail("hack", f"output {i} is a {type(r).__module__}.{type(r).__name__}, not a plain torch.Tensor")
            if tuple(r.shape) != tuple(o.shape):
                raise _Fail("shape", f"output {i}: shape {tuple(r.shape)}, expected {tuple(o.shape)}")
            if r.dtype != o.dtype:
                raise _Fail("dtype", f"output {i}: dtype {r.dtype}, expected {o.dtype}")
            if r.device != o.device:  # a host result would be copied in after the timed window closed
                raise _Fail("runtime", f"output {i} is on {r.device}, expected {o.device}")
            o.copy_(r)
        return None

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        op = msg[0]
        try:
            if op == "load":
                fn = _load_entry(args)
                reply("ok", {"sandbox": desc, "buffers": args.buffers, "pid": os.getpid(),
                            "persisting_l2_default": pinned_before, "persisting_l2_reset_each_call": reset_each_call,
                            "cpus": sorted(os.sched_getaffinity(0))})
            elif op == "register":
                _, j, inputs, outputs = msg
                sets.register(j, [attach(x) for x in inputs], [attach(o) for o in outputs])
                reply("ok")
            elif op == "call":
                stage(msg[1])
                if on_cuda:
                    torch.cuda.synchronize(device)
                res = invoke(msg[1])
                if on_cuda:
                    torch.cuda.synchronize(device)
                deliver(msg[1], res)
                publish(msg[1])
                if on_cuda:
                    torch.cuda.synchronize(device)
                reply("ok")
            elif op in ("time", "time_noop"):
                # time_noop: the same path with nothing called, for the judge's calibration (before load; under
                # the CUPTI window, also between timed calls)
                j = msg[1] if op == "time" else None
                which = msg[2 if op == "time" else 1] if len(msg) > (2 if op == "time" else 1) else args.timer
                if on_cuda and which not in timers:
                    raise _Fail("runtime", f"no {which!r} timer in this process (--timer {args.timer})")
                call = (lambda: invoke(j)) if j is not None else (lambda: None)
                flags = []
                if j is not None:
                    stage(j)  # before the flush: the copies leave nothing in L2 for the call
                if on_cuda:
                    if reset_each_call:
                        reset_l2()
                    flush()
                    torch.cuda.synchronize(device)
                    box = []
                    t, t_all, timer_flags = timers[which](lambda: box.append(call()))
                    flags.extend(timer_flags)
                    if pinned() > pinned_before:
                        flags.append("persisting-l2")
                    if j is not None:
                        deliver(j, box[0])
                        publish(j)
                    torch.cuda.synchronize(device)
                else:
                    t0 = perf()
                    res = call()
                    t = t_all = (perf() - t0) * 1e3
                    if j is not None:
                        deliver(j, res)
                        publish(j)
                reply("timed", t, t_all, flags)
            elif op == "exit":
                return
            else:
                reply("fail", "runtime", f"unknown message {op!r}")
        except _Fail as f:
            reply("fail", f.kind, str(f))
        except Exception as e:  # candidate code raised: report it, the judge decides
            reply("fail", _kind(e), _tail(e))


class _Fail(Exception):
    def __init__(self, kind: str, text: str):
        super().__init__(text)
        self.kind = kind


if __name__ == "__main__":
    main()
