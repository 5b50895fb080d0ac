"""Decode attention (one query per sequence) as split-KV flash decoding, in Triton.

For what SDPA's fused kernels do not serve at one query: logits soft-capped (``cap * tanh(s / cap)``), and
boolean key masks (ragged caches: a sequence attends to the first ``len`` of its cached tokens). Each program
takes one (sequence, KV head, slice of the cache) and all the query heads that share that KV head (GQA/MQA read
K/V once per group, unrepeated); a block of keys that no query head of the group may see is skipped without
loading K or V, so a cache filled to a quarter reads a quarter. A second kernel merges the slices' partial
softmaxes. fp32 statistics throughout; half-precision probabilities are rounded to V's dtype before P @ V, as a
reference's ``probs.to(q.dtype) @ v`` is. A row with no visible key is NaN, as softmax over -inf is.

Launcher: ``decode_attention(q, k, v, keep, scale, softcap, out_dtype, block_n)`` with q ``[B, Hq, 1, D]``,
k ``[B, Hkv, L, D]``, v ``[B, Hkv, L, Dv]``, keep None or a bool tensor broadcastable to ``[B, Hq, 1, L]``
(True: the key is seen).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_TARGET_PROGRAMS = 264  # about two waves on a 132-SM H100/H200: enough slices to fill the GPU at batch 1


@triton.jit
def _decode_partial(q_ptr, k_ptr, v_ptr, keep_ptr, acc_ptr, m_ptr, l_ptr,
                    sqb, sqh, skb, skh, skl, svb, svh, svl, smb, smh, sml,
                    n_keys, chunk, n_split, scale, softcap,
                    G: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, BLOCK_G: tl.constexpr,
                    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, BLOCK_N: tl.constexpr,
                    HAS_KEEP: tl.constexpr, HAS_CAP: tl.constexpr, IEEE: tl.constexpr):  # fmt: skip
    b = tl.program_id(0).to(tl.int64)
    hk = tl.program_id(1).to(tl.int64)
    s = tl.program_id(2)
    n_hq = tl.num_programs(1) * G
    g = tl.arange(0, BLOCK_G)
    g_ok = g < G
    h = hk * G + g
    d = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    q = tl.load(q_ptr + b * sqb + h[:, None] * sqh + d[None, :], mask=g_ok[:, None] & (d[None, :] < D), other=0.0)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_DV], tl.float32)
    start = s * chunk
    end = tl.minimum(start + chunk, n_keys)
    k_base = k_ptr + b * skb + hk * skh
    v_base = v_ptr + b * svb + hk * svh
    for n0 in range(start, end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        n_ok = n < end
        seen = g_ok[:, None] & n_ok[None, :]
        if HAS_KEEP:
            keep = tl.load(keep_ptr + b * smb + h[:, None] * smh + n[None, :] * sml, mask=seen, other=0)
            seen = seen & (keep != 0)
        if tl.max(seen.to(tl.int32)) > 0:
            kb = tl.load(k_base + n[:, None] * skl + d[None, :], mask=n_ok[:, None] & (d[None, :] < D), other=0.0)
            if IEEE:
                sc = tl.dot(q, tl.trans(kb), input_precision="ieee")
            else:
                sc = tl.dot(q, tl.trans(kb))
            sc = sc * scale
            if HAS_CAP:
                # tanh(x) = 1 - 2 / (exp(2x) + 1): saturates to +-1 without overflow
                sc = softcap * (1.0 - 2.0 / (tl.exp(2.0 * sc / softcap) + 1.0))
            sc = tl.where(seen, sc, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(sc, 1))
            m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp(sc - m_use[:, None])
            alpha = tl.exp(m_i - m_use)
            l_i = l_i * alpha + tl.sum(p, 1)
            vb = tl.load(v_base + n[:, None] * svl + dv[None, :], mask=n_ok[:, None] & (dv[None, :] < DV), other=0.0)
            if IEEE:
                pv = tl.dot(p.to(vb.dtype), vb, input_precision="ieee")
            else:
                pv = tl.dot(p.to(vb.dtype), vb)
            acc = acc * alpha[:, None] + pv
            m_i = m_new
    row = (b * n_hq + h) * n_split + s
    tl.store(acc_ptr + row[:, None] * DV + dv[None, :], acc, mask=g_ok[:, None] & (dv[None, :] < DV))
    tl.store(m_ptr + row, m_i, mask=g_ok)
    tl.store(l_ptr + row, l_i, mask=g_ok)


@triton.jit
def _decode_merge(acc_ptr, m_ptr, l_ptr, o_ptr, n_split, DV: tl.constexpr, BLOCK_S: tl.constexpr,
                  BLOCK_DV: tl.constexpr):  # fmt: skip
    row = tl.program_id(0).to(tl.int64)  # one (sequence, query head)
    s = tl.arange(0, BLOCK_S)
    s_ok = s < n_split
    dv = tl.arange(0, BLOCK_DV)
    m = tl.load(m_ptr + row * n_split + s, mask=s_ok, other=float("-inf"))
    l = tl.load(l_ptr + row * n_split + s, mask=s_ok, other=0.0)
    m_all = tl.max(m, 0)
    w = tl.where(m == float("-inf"), 0.0, tl.exp(m - tl.where(m_all == float("-inf"), 0.0, m_all)))
    acc = tl.load(acc_ptr + (row * n_split + s)[:, None] * DV + dv[None, :], mask=s_ok[:, None] & (dv[None, :] < DV),
                  other=0.0)  # fmt: skip
    out = tl.sum(acc * w[:, None], 0) / tl.sum(l * w, 0)
    tl.store(o_ptr + row * DV + dv, out.to(o_ptr.dtype.element_ty), mask=dv < DV)


def takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None) -> bool:
    """Whether ``decode_attention`` serves this call (shapes and dtypes only)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or q.shape[-2] != 1 or q.shape[0] != k.shape[0]:
        return False
    if q.shape[1] % k.shape[1] or k.shape[:3] != v.shape[:3] or q.shape[-1] != k.shape[-1]:
        return False
    if max(q.shape[-1], v.shape[-1]) > 256 or q.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return False
    if keep is not None:
        if keep.dim() > 4:
            return False
        try:
            torch.broadcast_shapes(keep.shape, (q.shape[0], q.shape[1], 1, k.shape[2]))
        except RuntimeError:
            return False
    return True


def decode_attention(q, k, v, keep, scale, softcap, out_dtype, block_n=64):
    b, hq, _, d = q.shape
    hkv, n_keys, dv = k.shape[1], k.shape[2], v.shape[-1]
    group = hq // hkv
    k, v = k.to(q.dtype), v.to(q.dtype)
    q3 = q.reshape(b, hq, d).contiguous()
    k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (k, v))
    out = torch.empty((b, hq, 1, dv), dtype=out_dtype, device=q.device)
    if out.numel() == 0:
        return out
    blocks = max(1, triton.cdiv(n_keys, block_n))
    n_split = max(1, min(blocks, triton.cdiv(_TARGET_PROGRAMS, b * hkv), 64))
    chunk = triton.cdiv(blocks, n_split) * block_n
    n_split = triton.cdiv(n_keys, chunk) if n_keys else 1
    acc = torch.empty((b * hq * n_split, dv), dtype=torch.float32, device=q.device)
    m = torch.empty((b * hq * n_split,), dtype=torch.float32, device=q.device)
    l = torch.empty_like(m)
    if keep is not None:
        keep = keep.expand(b, hq, 1, n_keys).view(torch.uint8)
        km = (keep, keep.stride(0), keep.stride(1), keep.stride(3))
    else:
        km = (q3, 0, 0, 0)
    _decode_partial[(b, hkv, n_split)](
        q3, k, v, km[0], acc, m, l, q3.stride(0), q3.stride(1), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), km[1], km[2], km[3], n_keys, chunk, n_split, float(scale),
        float(softcap or 1.0), G=group, D=d, DV=dv, BLOCK_G=max(16, triton.next_power_of_2(group)),
        BLOCK_D=max(16, triton.next_power_of_2(d)), BLOCK_DV=max(16, triton.next_power_of_2(dv)), BLOCK_N=block_n,
        HAS_KEEP=keep is not None, HAS_CAP=bool(softcap), IEEE=q.dtype == torch.float32, num_warps=4,
    )  # fmt: skip
    _decode_merge[(b * hq,)](acc, m, l, out, n_split, DV=dv, BLOCK_S=triton.next_power_of_2(n_split),
                             BLOCK_DV=triton.next_power_of_2(dv), num_warps=4)  # fmt: skip
    return out
