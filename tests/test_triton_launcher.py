"""The fast Triton launch path rendered into template sources (``agents.offline.templates.base``)."""

from __future__ import annotations

import inspect

import torch

from agents.offline.templates.base import triton_launcher


class _Param:
    def __init__(self, name, default=inspect.Parameter.empty):
        self.name, self.default = name, default


class _Compiled:
    """Stands in for triton's CompiledKernel: its C launcher ``run(gx, gy, gz, stream, function, packed,
    launch_metadata, enter_hook, exit_hook, *all_args)``."""

    function, packed_metadata = "fn", "packed"

    def __init__(self, log):
        self.log = log
        self.run = None

    def _init_handles(self):
        self.run = lambda gx, gy, gz, stream, fn, packed, meta, enter, exit_, *args: self.log.append(
            ("fast", (gx, gy, gz), stream, fn, packed, args)
        )


class _OnDevice(torch.Tensor):
    """A CPU tensor that reports device 3, as a CUDA tensor would."""

    def get_device(self):
        return 3


def _t(x):
    return torch.Tensor._make_subclass(_OnDevice, x)


class _Kernel:
    """Stands in for a @triton.jit function: ``[grid](*args, **kwargs)`` binds, compiles, launches."""

    def __init__(self, params):
        self.params = params
        self.log = []

    def __getitem__(self, grid):
        def jit(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return _Compiled(self.log)

        return jit


def _launcher_class():
    ns = {"torch": torch}
    exec(compile(triton_launcher(), "<launcher>", "exec"), ns)
    ns["_raw_stream"] = lambda device: f"stream{device}"  # torch's current raw stream of that device
    return ns["_Launcher"]


def test_second_call_with_the_same_specialization_skips_the_jit():
    k = _Kernel([_Param("x"), _Param("n"), _Param("BLOCK"), _Param("FLAG", False)])
    launch = _launcher_class()(k)
    x, y = _t(torch.zeros(8)), _t(torch.ones(8))
    launch((4,), x, 8, BLOCK=16, num_warps=4)
    launch((4,), y, 8, BLOCK=16, num_warps=4)
    assert [e[0] for e in k.log] == ["jit", "fast"]
    # the C launcher gets a 3-D grid, the device's current stream, the kernel's handles, and every
    # parameter in order (constexprs and defaults too)
    _, grid, stream, fn, packed, args = k.log[1]
    assert (grid, stream, fn, packed) == ((4, 1, 1), "stream3", "fn", "packed")
    assert args[0] is y and args[1:] == (8, 16, False)


def test_a_different_specialization_goes_back_to_the_jit():
    k = _Kernel([_Param("x"), _Param("n"), _Param("BLOCK")])
    launch = _launcher_class()(k)
    x = _t(torch.zeros(64))
    launch((4,), x, 8, BLOCK=16)
    launch((4,), x.half(), 8, BLOCK=16)  # dtype
    launch((4,), x[1:], 8, BLOCK=16)  # 16-byte alignment
    launch((4,), x, 1, BLOCK=16)  # scalar value (Triton specializes 1)
    launch((4,), x, 8, BLOCK=32)  # constexpr
    launch((8,), x, 8, BLOCK=16)  # grid
    assert [e[0] for e in k.log] == ["jit"] * 6
    launch((4,), x, 8, BLOCK=16)
    assert k.log[-1][0] == "fast"


def test_nothing_is_cached_when_a_parameter_cannot_be_bound():
    k = _Kernel([_Param("x"), _Param("BLOCK")])  # BLOCK has no default and is not given
    launch = _launcher_class()(k)
    x = _t(torch.zeros(8))
    launch((1,), x)
    launch((1,), x)
    assert [e[0] for e in k.log] == ["jit", "jit"]


def test_cpu_tensors_always_take_the_jit_path():
    k = _Kernel([_Param("x")])
    launch = _launcher_class()(k)
    x = torch.zeros(8)  # get_device() == -1: no CUDA stream to launch on
    launch((1,), x)
    launch((1,), x)
    assert [e[0] for e in k.log] == ["jit", "jit"]


def test_interpreted_kernels_always_take_the_jit_path():
    class Interpreted:  # the CPU interpreter's kernels: no params, launching returns nothing
        log = []

        def __getitem__(self, grid):
            return lambda *a, **kw: self.log.append("jit")

    k = Interpreted()
    launch = _launcher_class()(k)
    launch((1,), torch.zeros(4))
    launch((1,), torch.zeros(4))
    assert k.log == ["jit", "jit"]


def test_a_launcher_that_refuses_its_arguments_sends_every_later_call_to_the_jit():
    class Refusing(_Compiled):
        def _init_handles(self):
            def run(*a):
                self.log.append(("refused",))
                raise TypeError("function takes 12 positional arguments")

            self.run = run

    class Kernel(_Kernel):
        def __getitem__(self, grid):
            def jit(*args, **kwargs):
                self.log.append(("jit", grid, args, kwargs))
                return Refusing(self.log)

            return jit

    k = Kernel([_Param("x")])
    launch = _launcher_class()(k)
    x = _t(torch.zeros(8))
    for _ in range(3):
        launch((1,), x)
    assert [e[0] for e in k.log] == ["jit", "refused", "jit", "jit"]
