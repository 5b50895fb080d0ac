"""The fast Triton launch path rendered into template sources (``agents.offline.templates.base``)."""

from __future__ import annotations

import inspect

import torch

from agents.offline.templates.base import triton_launcher


class _Param:
    def __init__(self, name, default=inspect.Parameter.empty):
        self.name, self.default = name, default


class _Compiled:
    """Stands in for triton's CompiledKernel: ``[grid3](*all_args)`` launches."""

    def __init__(self, log):
        self.log = log

    def run(self, *a):  # only its presence matters
        raise AssertionError("not called directly")

    def __getitem__(self, grid):
        return lambda *args: self.log.append(("fast", grid, args))


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
    return ns["_Launcher"]


def test_second_call_with_the_same_specialization_skips_the_jit():
    k = _Kernel([_Param("x"), _Param("n"), _Param("BLOCK"), _Param("FLAG", False)])
    launch = _launcher_class()(k)
    x, y = torch.zeros(8), torch.ones(8)
    launch((4,), x, 8, BLOCK=16, num_warps=4)
    launch((4,), y, 8, BLOCK=16, num_warps=4)
    assert [e[0] for e in k.log] == ["jit", "fast"]
    # the compiled launcher gets every parameter in order (constexprs and defaults too) and a 3-D grid
    assert k.log[1][1] == (4, 1, 1)
    assert k.log[1][2][0] is y and k.log[1][2][1:] == (8, 16, False)


def test_a_different_specialization_goes_back_to_the_jit():
    k = _Kernel([_Param("x"), _Param("n"), _Param("BLOCK")])
    launch = _launcher_class()(k)
    x = torch.zeros(64)
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
    x = torch.zeros(8)
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
