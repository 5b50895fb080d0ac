"""The runtime of an exported kernel package (copied verbatim into it as ``_runtime.py``).

It needs torch and the standard library only, so the package works without solforge installed. Each op
directory holds ``manifest.json`` (the problem's inputs and outputs and every input signature its winner
was judged on), ``reference.py`` (the problem's reference) and ``kernel/`` (the winner's sources).

A call whose inputs match a judged signature (tensor shapes and dtypes, the device type, contiguous
tensors, and the scalar values the workload fixed) runs the winner; any other call runs the reference,
since the winner was never shown correct there.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

MANIFEST = "manifest.json"
REFERENCE_FILE = "reference.py"
KERNEL_DIR = "kernel"
_CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".cu")


def _dtype(name: str) -> torch.dtype:
    value = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"{MANIFEST}: {name!r} is not a torch dtype")
    return value


@dataclass(frozen=True)
class JudgedSignature:
    """One workload's inputs as the judge made them, and the outputs the winner wrote there."""

    tensors: tuple[tuple[tuple[int, ...], str], ...]  # (shape, torch dtype) of each tensor input, in order
    scalars: dict[str, Any]  # scalar inputs whose value the workload fixed
    outputs: tuple[tuple[tuple[int, ...], str], ...]  # (shape, torch dtype) of each output, in order

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "JudgedSignature":
        return cls(
            tensors=tuple((tuple(s), t) for s, t in d["tensors"]),
            scalars=dict(d["scalars"]),
            outputs=tuple((tuple(s), t) for s, t in d["outputs"]),
        )


def _load_module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _cuda_gencode() -> list[str]:
    if not torch.cuda.is_available():
        return []
    major, minor = torch.cuda.get_device_capability()
    arch = f"{major}{minor}a" if (major, minor) >= (9, 0) else f"{major}{minor}"
    return [f"-gencode=arch=compute_{arch},code=sm_{arch}"]


def _aliases(out: torch.Tensor, inputs: list[torch.Tensor], by_storage: bool) -> bool:
    base = out._base if out._base is not None else out
    if any(base is a or base is a._base for a in inputs):
        return True
    # fake and meta tensors (tracing) have no storage address to compare
    return by_storage and any(out.untyped_storage().data_ptr() == a.untyped_storage().data_ptr() for a in inputs)


class KernelOp:
    """Calls the winner on judged signatures and the reference elsewhere; counts which ran in ``calls``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        m = json.loads((self.root / MANIFEST).read_text())
        self.manifest = m
        self.name: str = m["op"]
        self.inputs: list[str] = list(m["inputs"])
        self.scalar_inputs: set[str] = {n for n, spec in m["inputs"].items() if spec["scalar"]}
        self.outputs: list[str] = list(m["outputs"])
        self.device_type: str = m["device_type"]
        self.destination_passing: bool = m["destination_passing_style"]
        self.judged: dict[tuple, list[JudgedSignature]] = {}
        for d in m["judged"]:
            sig = JudgedSignature.from_json(d)
            self.judged.setdefault(sig.tensors, []).append(sig)
        self.calls = {"kernel": 0, "reference": 0}
        self._lock = threading.Lock()
        self._kernel_fn: Callable[..., Any] | None = None
        self._reference_fn: Callable[..., Any] | None = None

    @classmethod
    def from_dir(cls, module_file: str) -> "KernelOp":
        return cls(Path(module_file).resolve().parent)

    # -- dispatch ------------------------------------------------------------------------------------

    def match(self, args: tuple[Any, ...]) -> JudgedSignature | None:
        """The judged signature these arguments fall on, or None."""
        if len(args) != len(self.inputs):
            raise TypeError(f"{self.name}: expected {len(self.inputs)} inputs {self.inputs}, got {len(args)}")
        tensors = []
        for name, a in zip(self.inputs, args):
            if name in self.scalar_inputs:
                continue
            if not isinstance(a, torch.Tensor) or a.device.type != self.device_type or not a.is_contiguous():
                return None
            tensors.append((tuple(a.shape), str(a.dtype).removeprefix("torch.")))
        values = dict(zip(self.inputs, args))
        for sig in self.judged.get(tuple(tensors), ()):
            if all(values[n] == v for n, v in sig.scalars.items()):
                return sig
        return None

    def __call__(self, *args: Any) -> Any:
        sig = self.match(args)
        if sig is None:
            self.calls["reference"] += 1
            return self._detach_aliases(args, self.reference()(*args), by_storage=True)
        self.calls["kernel"] += 1
        kernel = self.kernel()
        if self.destination_passing:
            device = next(a.device for a in args if isinstance(a, torch.Tensor))
            outs = [torch.empty(shape, dtype=_dtype(dt), device=device) for shape, dt in sig.outputs]
            kernel(*args, *outs)
            return outs[0] if len(outs) == 1 else tuple(outs)
        return self._detach_aliases(args, kernel(*args), by_storage=True)

    def fake(self, *args: Any) -> Any:
        """Output metadata for tracing (``register_fake``): the manifest's shapes on a judged signature, else
        (symbolic shapes included) the reference run on the fake inputs."""
        static = all(isinstance(d, int) for a in args if isinstance(a, torch.Tensor) for d in a.shape)
        sig = self.match(args) if static else None
        if sig is None:
            return self._detach_aliases(args, self.reference()(*args), by_storage=False)
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        outs = [torch.empty(shape, dtype=_dtype(dt), device=device) for shape, dt in sig.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _detach_aliases(self, args: tuple[Any, ...], result: Any, by_storage: bool) -> Any:
        # A custom op may not return a view of its inputs; a reference that returns one gets a copy.
        many = isinstance(result, (tuple, list))
        outs = list(result) if many else [result]
        if len(outs) != len(self.outputs):
            raise RuntimeError(f"{self.name}: returned {len(outs)} outputs, the problem declares {self.outputs}")
        inputs = [a for a in args if isinstance(a, torch.Tensor)]
        fixed = [o.clone() if isinstance(o, torch.Tensor) and _aliases(o, inputs, by_storage) else o for o in outs]
        return fixed[0] if len(fixed) == 1 else tuple(fixed)

    # -- loading -------------------------------------------------------------------------------------

    def reference(self) -> Callable[..., Any]:
        with self._lock:
            if self._reference_fn is None:
                module = _load_module(self.root / REFERENCE_FILE, f"_solforge_kernels_ref_{self.name}")
                self._reference_fn = module.run
            return self._reference_fn

    def kernel(self) -> Callable[..., Any]:
        """The winner's entry function, imported (Python) or built (C++) on first use."""
        with self._lock:
            if self._kernel_fn is None:
                self._kernel_fn = self._build_cpp() if self.manifest["cpp"] else self._import_python()
            return self._kernel_fn

    def _import_python(self) -> Callable[..., Any]:
        src = self.root / KERNEL_DIR
        if str(src) not in sys.path:
            sys.path.append(str(src))  # last, as the judge does: the winner's helper modules never shadow others
        stem = Path(self.manifest["entry_file"]).with_suffix("").as_posix().replace("/", "_")
        module = _load_module(src / self.manifest["entry_file"], f"_solforge_kernels_{self.name}_{stem}")
        return getattr(module, self.manifest["entry_function"])

    def _build_cpp(self) -> Callable[..., Any]:
        from torch.utils import cpp_extension

        src = self.root / KERNEL_DIR
        sources = [str(p) for p in sorted(src.rglob("*")) if p.suffix in _CPP_SUFFIXES]
        with_cuda = any(s.endswith(".cu") for s in sources)
        opts = self.manifest["compile_options"]
        module = cpp_extension.load(
            name=f"solforge_kernels_{self.name}",
            sources=sources,
            extra_cflags=["-O3", *opts.get("cflags", [])],
            extra_cuda_cflags=["-O3", *_cuda_gencode(), *opts.get("cuda_cflags", [])] if with_cuda else None,
            extra_ldflags=list(opts.get("ld_flags", [])),
            extra_include_paths=[str(src)],
            with_cuda=with_cuda,
        )
        return getattr(module, self.manifest["entry_function"])
