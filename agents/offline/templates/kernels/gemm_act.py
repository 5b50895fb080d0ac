

# The GEMM epilogues' activation of the fp32 accumulator, one formula per name for the tiled and the persistent
# kernels: ACT is "none", "relu", "silu", "gelu" (exact, by erf, as F.gelu's default) or "tanh".
@triton.jit
def _gemm_act(acc, ACT: tl.constexpr):
    if ACT == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACT == "silu":
        acc = acc * tl.sigmoid(acc)
    elif ACT == "gelu":
        acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    elif ACT == "tanh":
        acc = 2.0 * tl.sigmoid(2.0 * acc) - 1.0
    return acc
