

try:
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
except ImportError:  # a Triton without host-side descriptors
    _TensorDescriptor = None


def _tma_ready(*ts):
    # the copy engine reads 2-D tensors with unit column stride and 16-byte aligned rows and base, on sm_90
    # and newer. Off CUDA (the interpreter) not for bfloat16: Triton 3.9's interpreter multiplies bfloat16
    # blocks loaded through descriptors wrongly (float32 and float16 are right).
    if _TensorDescriptor is None:
        return False
    for t in ts:
        if t.dim() != 2 or t.stride(1) != 1 or (t.stride(0) * t.element_size()) % 16 or t.data_ptr() % 16:
            return False
        if t.is_cuda and torch.cuda.get_device_capability(t.device)[0] < 9:
            return False
        if not t.is_cuda and t.dtype == torch.bfloat16:
            return False
    return True


def _desc(t, rows, cols):
    return _TensorDescriptor.from_tensor(t, [rows, cols])


def _jit_launch(kernel):
    # descriptor arguments are not hashable: these launches go through the JIT (a graph replays them)
    return lambda grid, *args, **kwargs: kernel[grid](*args, **kwargs)
