"""Decode attention in CUDA C++ (one query per sequence in every workload, head dim 64/128, at most 8 query
heads per kv head, bf16/fp16; ``cuda_decode_accepts``): flash-decoding launched from C++, so no Python launch
cost. A CTA takes one (batch, kv head, slice of the KV length), its warps 16-key tiles with every query head of
the group on tensor cores (mma.sync m16n8k16, fp32 accumulation); the slices are sized from the device's SM count
and the kernel's occupancy, and the last CTA of each (batch, kv head) to finish merges them in the same launch
(``kernels/attention_decode.cu``).
"""

from __future__ import annotations

from typing import Any, Mapping

from sol_bench.problem import Problem

from .attention_match import LAYOUTS, out_name
from .base import CUDA_ARRIVAL_COUNTERS, CUDA_CLUSTERS, Binding, cuda_module, kernel_source

CUDA_DECODE_HEAD_DIMS = (64, 128)
CUDA_DECODE_MAX_GROUP = 8  # query heads per kv head: the n = 8 of one mma tile
CUDA_DECODE_TILE = 16  # keys per warp step (the m16 of S^T = K Q^T)
CUDA_DECODE_MAX_SPLITS = 64

_CUDA_DECODE = kernel_source("attention_decode.cu").replace("TILE_KEYS", str(CUDA_DECODE_TILE)).replace(
    "MAX_SPLITS_PER_HEAD", str(CUDA_DECODE_MAX_SPLITS)
)

_CUDA_TYPES = {"bfloat16": ("__nv_bfloat16", "at::kBFloat16"), "float16": ("__half", "at::kHalf")}


def cuda_decode_accepts(b: Binding) -> bool:
    """Decode shapes the CUDA kernel handles: one query per sequence in every workload (where a causal mask,
    bottom-right aligned, hides nothing), head dim 64 or 128, at most 8 query heads per kv head, bf16/fp16."""
    c = b.consts
    return (c.get("max_sq") == 1 and c["causal"] in (False, "bottom_right") and c["head_dim"] in CUDA_DECODE_HEAD_DIMS
            and 0 < c.get("max_group", 0) <= CUDA_DECODE_MAX_GROUP and c.get("dtype") in _CUDA_TYPES)  # fmt: skip


def render_attention_cuda(problem: Problem, b: Binding, p: Mapping[str, Any]) -> dict[str, str]:
    if not cuda_decode_accepts(b):
        raise ValueError(f"the CUDA decode attention template does not handle {dict(b.consts)}")
    c = b.consts
    q, k, v, o = b.roles["q"], b.roles["k"], b.roles["v"], out_name(problem)
    qa, ka = LAYOUTS[c["layout"]]
    (qb, qh, qs, qd), (kb, kh, ks, kd) = qa, ka
    d, threads, waves = c["head_dim"], p["threads"], p["waves"]
    cluster = "true" if p.get("cluster") else "false"
    ctype, atype = _CUDA_TYPES[c["dtype"]]
    # query head of (kv head hk, group member g) = hk * mul_k + g * mul_g
    mul_k, mul_g = ("1", "HKV_") if c["gqa"] == "tile" else ("G_", "1")
    qk_scale = c["scale"] * 1.4426950408889634
    rank = len(qa) - (qs is None)
    one_query = ""
    if qs is not None:
        one_query = f'\n  TORCH_CHECK({q}.size({qs}) == 1, "decode attention: one query per sequence expected");'
    body = f"""  TORCH_CHECK({q}.is_cuda() && {k}.is_cuda() && {v}.is_cuda() && {o}.is_cuda(),
              "decode attention: CUDA tensors expected");
  TORCH_CHECK({q}.dim() == {rank} && {k}.dim() == 4 && {v}.dim() == 4 && {o}.dim() == {rank},
              "decode attention: q/out of rank {rank} and k/v of rank 4 expected");
  TORCH_CHECK({q}.scalar_type() == {atype} && {k}.scalar_type() == {atype} && {v}.scalar_type() == {atype} &&
              {o}.scalar_type() == {atype}, "decode attention: {c["dtype"]} tensors expected");
  const long long B = {q}.size({qb}), H = {q}.size({qh}), D = {q}.size({qd});
  const long long HKV = {k}.size({kh}), L = {k}.size({ks});{one_query}
  TORCH_CHECK({k}.size({kb}) == B && {k}.size({kd}) == D && {v}.sizes() == {k}.sizes() &&
              {o}.sizes() == {q}.sizes(), "decode attention: q/out and k/v shapes disagree");
  TORCH_CHECK(D == {d}, "decode attention: rendered for head dim {d}, got ", D);
  TORCH_CHECK(HKV > 0 && H % HKV == 0 && H / HKV <= {CUDA_DECODE_MAX_GROUP}, "decode attention: query heads must be a "
              "multiple (at most {CUDA_DECODE_MAX_GROUP}x) of kv heads, got ", H, " and ", HKV);
  TORCH_CHECK({q}.stride({qd}) == 1 && {k}.stride({kd}) == 1 && {v}.stride({kd}) == 1 && {o}.stride({qd}) == 1,
              "decode attention: the head dim must be contiguous");
  TORCH_CHECK(attn_aligned({q}, 8, {qb}, {qh}, {qb}) && attn_aligned({k}, 8, {kb}, {kh}, {ks}) &&
              attn_aligned({v}, 8, {kb}, {kh}, {ks}) && attn_aligned({o}, 4, {qb}, {qh}, {qb}),
              "decode attention: 16-byte aligned rows expected (8-byte for the output)");
  if (B == 0 || H == 0) return;
  TORCH_CHECK(L > 0 && L < (1LL << 30), "decode attention: KV length ", L, " not handled");
  const int HKV_ = (int)HKV, G_ = (int)(H / HKV);
  DecodeAttnArgs a;
  a.sqb = {q}.stride({qb}); a.sqh = {q}.stride({qh});
  a.skb = {k}.stride({kb}); a.skh = {k}.stride({kh}); a.sks = {k}.stride({ks});
  a.svb = {v}.stride({kb}); a.svh = {v}.stride({kh}); a.svs = {v}.stride({ks});
  a.sob = {o}.stride({qb}); a.soh = {o}.stride({qh});
  a.HKV = HKV_; a.G = G_; a.L = (int)L; a.chunk = 0; a.splits = 0;
  a.head_mul_k = {mul_k}; a.head_mul_g = {mul_g};
  a.qk_scale = {qk_scale!r}f;
  using scalar_t = {ctype};
  decode_attention<scalar_t, {d}, {threads}, {waves}, {cluster}>({q}, reinterpret_cast<const scalar_t*>({q}.data_ptr()),
      reinterpret_cast<const scalar_t*>({k}.data_ptr()), reinterpret_cast<const scalar_t*>({v}.data_ptr()),
      reinterpret_cast<scalar_t*>({o}.data_ptr()), B, a, c10::cuda::getCurrentCUDAStream());"""
    return cuda_module(problem, CUDA_ARRIVAL_COUNTERS + CUDA_CLUSTERS + _CUDA_DECODE, body)

