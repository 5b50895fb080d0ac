

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Inductor's generated code calls


class _Launcher:
    """``kernel[grid](*args, **kwargs)``, straight into the compiled kernel's launcher once it exists."""

    def __init__(self, kernel):
        self.kernel = kernel
        # the CPU interpreter's kernels have no ``params``: nothing is ever cached for them
        self.params = [(p.name, getattr(p, "default", _inspect.Parameter.empty)) for p in getattr(kernel, "params", ())]
        self.compiled = {}
        self.unusable = False

    def __call__(self, grid, *args, **kwargs):
        key = (grid, tuple(kwargs.items()), *[
            (a.dtype, a.get_device(), a.data_ptr() % 16 == 0) if isinstance(a, torch.Tensor) else a for a in args
        ])
        hit = self.compiled.get(key)
        if hit is not None:
            run, gx, gy, gz, device, function, packed, rest = hit
            try:
                run(gx, gy, gz, _raw_stream(device), function, packed, None, None, None, *args, *rest)
                return
            except TypeError:  # a Triton whose launcher takes other arguments: the JIT from now on
                self.compiled.clear()
                self.unusable = True
        kernel = self.kernel[grid](*args, **kwargs)
        if self.unusable or kernel is None or not hasattr(kernel, "packed_metadata") or _raw_stream is None:
            return  # the interpreter (nothing compiled to keep) or an unknown Triton: the JIT every call
        rest = []
        for name, default in self.params[len(args):]:
            if name in kwargs:
                rest.append(kwargs[name])
            elif default is not _inspect.Parameter.empty:
                rest.append(default)
            else:
                return
        devices = [a.get_device() for a in args if isinstance(a, torch.Tensor)]
        if not devices or devices[0] < 0:
            return
        kernel._init_handles()
        gx, gy, gz = tuple(grid) + (1,) * (3 - len(grid))
        self.compiled[key] = (kernel.run, gx, gy, gz, devices[0], kernel.function, kernel.packed_metadata, tuple(rest))
