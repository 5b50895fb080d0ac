"""What a subgraph candidate runs: per input signature, capture the reference, replace the families found in
it, compile the rest with Inductor, and replay the whole call as one CUDA graph.

The candidate's entry file holds the reference and ``agents/offline/replay.py``'s text (its ``_into``,
``_graphed`` and ``_signature`` are handed to ``Runner``, so the replay machinery is the one every
reference-derived candidate uses). At the first call of a signature ``Runner`` traces the reference with
fake tensors (where data-dependent expert loops stop that: with the call's inputs, the loops grouped and checked
against the reference on them, ``loops.py``), rewrites the graph (each region checked on the call's device,
against the family's kernel there, before it is replaced), and compiles the rewritten graph in
destination-passing form (Inductor's kernels store into the judge's output buffers, and so do the family ops
whose results are outputs: ``into.py``). A reference that does not
trace is compiled as it is. Off CUDA nothing is compiled: the rewritten graph runs as it is (the families' CPU
ops are plain torch).

Shipped inside subgraph candidates: torch only.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .capture import NotCapturable
from .into import Destination, Written, write_into
from .loops import accounted, captured
from .rewrite import Replaced, rewrite


@dataclass
class Runner:
    """The candidate's entry: ``runner(*inputs, *outputs)`` writes the reference's results into the outputs."""

    fn: Callable[..., Any]  # the reference's run
    n_outputs: int
    into: Callable[[Callable[..., Any], int], Callable[..., None]]  # replay._into
    graphed: Callable[[Callable[..., None], tuple], None]  # replay._graphed
    signature: Callable[[tuple], Any]  # replay._signature
    bodies: dict[Any, Callable[..., None]] = field(default_factory=dict)
    replaced: dict[Any, list[Replaced] | str] = field(default_factory=dict)  # per signature: regions, or why none

    def __call__(self, *args: Any) -> None:
        sig = self.signature(args)
        body = self.bodies.get(sig)
        if body is None:
            split = len(args) - self.n_outputs
            body = self.bodies[sig] = self._build(sig, args[:split], args[split:])
        self.graphed(body, args)

    def _build(self, sig: Any, inputs: tuple, outputs: tuple) -> Callable[..., None]:
        tensors = [a for a in inputs if isinstance(a, torch.Tensor)]
        device = tensors[0].device if tensors else torch.device("cpu")
        body: Callable[..., None] = self.into(self.fn, self.n_outputs)
        stored = 0
        try:
            gm, done = rewrite(captured(self.fn, inputs), device)
            self.replaced[sig] = accounted(gm, done)
            written = write_into(gm, [Destination.of(o) for o in outputs], device)
            body = _storing(written, self.n_outputs) if written.count else self.into(gm, self.n_outputs)
            stored = written.count
        except NotCapturable as e:
            self.replaced[sig] = str(e)
        self._tell(tensors, self.replaced[sig], stored, len(outputs))
        return torch.compile(body, dynamic=False) if device.type == "cuda" else body

    @staticmethod
    def _tell(tensors: list[torch.Tensor], replaced: list[Replaced] | str, stored: int, outputs: int) -> None:
        # One line per signature in the candidate's output (the judge puts it in the trace): what ran there.
        if isinstance(replaced, str):
            what = f"nothing (not captured: {replaced})"
        else:
            what = "; ".join(r.description for r in replaced) or "nothing (no region reproduced here)"
        shapes = [tuple(t.shape) for t in tensors]
        print(f"solforge subgraph {shapes}: replaced {what}", file=sys.stderr, flush=True)
        if stored:
            print(f"solforge into {shapes}: family ops store {stored} of {outputs} outputs themselves", file=sys.stderr,
                  flush=True)  # fmt: skip


def _storing(written: Written, n_outputs: int) -> Callable[..., None]:
    """``written.gm`` in destination-passing form: the outputs it does not store itself are copied in."""

    def body(*args: Any) -> None:
        outputs = args[len(args) - n_outputs :]
        rest = [o for i, o in enumerate(outputs) if i not in written.direct]
        for dst, src in zip(rest, written.gm(*args), strict=True):
            dst.copy_(src)

    return body
