"""A launch pre-roll that holds every SM of the GPU, so no other stream's kernel can run beside it.

The stream pre-roll (``torch.cuda._sleep``) is one thread spinning on one SM. A candidate that puts its work
on a stream that does not wait for the timed one gets that work run beside the pre-roll, before the timed
window opens (``tests/judge_corpus/gpu/preroll_overlap``). This pre-roll launches, per SM, as many
1024-thread blocks as the SM holds threads, each with an equal share of the SM's shared memory: while it
spins no SM has a thread slot or shared memory left, so another kernel's blocks start only when it ends.
Copy engines are not held (a side-stream copy can still run beside it; it computes nothing).

It spins on ``%globaltimer`` (nanoseconds), so unlike the stream pre-roll it needs no clock calibration.
Built at run time with NVRTC for the device's own architecture; launched with the driver API.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch

KERNEL_NAME = "solforge_device_preroll"
THREADS = 1024
SOURCE = r"""
extern "C" __global__ void __launch_bounds__(1024) solforge_device_preroll(unsigned long long ns) {
  extern __shared__ unsigned char held[];  // sized at launch: this block's share of the SM's shared memory
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (t == 0ull) held[threadIdx.x] = 0;  // never true; keeps the allocation referenced
}
"""


@dataclass(frozen=True)
class Geometry:
    blocks: int
    threads: int
    shared_bytes: int  # dynamic shared memory per block


def geometry(sm_count: int, threads_per_sm: int, shared_per_sm: int, reserved_per_block: int,
             shared_per_block_optin: int, threads: int = THREADS) -> Geometry:  # fmt: skip
    """Blocks that together take every thread slot and all shared memory of every SM."""
    per_sm = max(1, threads_per_sm // threads)
    shared = min(shared_per_sm // per_sm - reserved_per_block, shared_per_block_optin)
    if shared <= 0 or sm_count <= 0:
        raise ValueError(f"no device-wide pre-roll for {sm_count} SMs with {shared_per_sm} B of shared memory each")
    return Geometry(sm_count * per_sm, threads, shared)


def compile_cubin(arch: str) -> bytes:
    """NVRTC build of the pre-roll kernel for ``arch`` (e.g. ``sm_90``)."""
    from cuda.bindings import nvrtc

    def ok(ret):
        err, *rest = ret if isinstance(ret, tuple) else (ret,)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC failed building the device pre-roll: {err}")
        return rest[0] if len(rest) == 1 else rest

    prog = ok(nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"device_preroll.cu", 0, [], []))
    try:
        err = nvrtc.nvrtcCompileProgram(prog, 1, [f"--gpu-architecture={arch}".encode()])[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = ok(nvrtc.nvrtcGetProgramLogSize(prog))
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC failed building the device pre-roll for {arch}:\n{log.decode(errors='replace')}")
        size = ok(nvrtc.nvrtcGetCUBINSize(prog))
        cubin = b" " * size
        ok(nvrtc.nvrtcGetCUBIN(prog, cubin))
        return cubin
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


class DevicePreroll:
    """Launches the device-wide pre-roll of ``preroll_us`` on ``stream``. Everything the launch needs is
    bound when this is made (before candidate code loads), as ``CudaTimer`` binds its primitives."""

    def __init__(self, device: torch.device, stream: torch.cuda.Stream, preroll_us: float):
        from cuda.bindings import driver as cu

        def ok(ret):
            err, *rest = ret
            if err != cu.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"CUDA driver call failed setting up the device pre-roll: {err}")
            return rest[0] if len(rest) == 1 else rest

        index = device.index if device.index is not None else torch.cuda.current_device()
        torch.cuda.synchronize(device)  # the primary context exists and is current on this thread
        dev = ok(cu.cuDeviceGet(index))
        a = cu.CUdevice_attribute

        def attr(name: str) -> int:
            return int(ok(cu.cuDeviceGetAttribute(getattr(a, name), dev)))

        major, minor = torch.cuda.get_device_capability(device)
        self.geometry = geometry(
            attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            attr("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
            attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
            attr("CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK"),
            attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        )  # fmt: skip
        self._module = ok(cu.cuModuleLoadData(compile_cubin(f"sm_{major}{minor}")))
        self._fn = ok(cu.cuModuleGetFunction(self._module, KERNEL_NAME.encode()))
        fa = cu.CUfunction_attribute
        # All of the SM's unified L1/shared memory as shared memory, or fewer blocks would fit per SM.
        for key, value in ((fa.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.geometry.shared_bytes),
                           (fa.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100)):  # fmt: skip
            (err,) = cu.cuFuncSetAttribute(self._fn, key, value)
            if err != cu.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"CUDA driver call failed setting up the device pre-roll: {key.name}: {err}")
        self._launch = cu.cuLaunchKernel
        self._stream = cu.CUstream(stream.cuda_stream)
        self._params = ((int(preroll_us * 1e3),), (ctypes.c_ulonglong,))
        self._success = cu.CUresult.CUDA_SUCCESS

    def __call__(self) -> None:
        g = self.geometry
        (err,) = self._launch(self._fn, g.blocks, 1, 1, g.threads, 1, 1, g.shared_bytes, self._stream, self._params, 0)
        if err != self._success:
            raise RuntimeError(f"launching the device pre-roll failed: {err}")
