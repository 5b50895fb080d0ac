#!/bin/bash
# Proposed for session 14 (written in session 13, not yet run). Session 13 found that T_b from torch.compile is
# one draw of Inductor's runtime autotuner (bench/tb_stability.py: fresh compiles of RMSNorm h7168 read 2.88 /
# 2.86 / 1.92 us), so every row of the offline table stands on a single draw. This measures T_b for all 16
# problems as the fastest of two fresh compiles, in two calls of ~27-30 s a run (16 x 2 runs ~ 900 s; a call cut
# at its 480 s limit keeps every problem it finished, since tb_stability.py writes after each), with the
# same variants as every earlier T_b. Then, on the CPU:
#   python bench/offline_table.py --records <session 13's table-1 records> --baselines <its T_b files> \
#       docs/bench/h200_tb_fastest_{a,b}.jsonl -o docs/bench/h200_offline_agents_session14.md
# Prediction: RMSNorm h7168's row falls to ~0.51 and gelu_tanh's stays ~0.5; rows whose T_b is cuBLAS
# (linears, cudagraph-eager) move under 3%; the median lands at 0.55-0.58, under the 0.6 target.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
L1=data/problems/L1 L2=data/problems/L2
VARIANTS=eager,compile-default,cudagraph-eager,cudagraph-compile-default
stability() {  # stability NAME PROBLEMS...
  local n=$1; shift
  timeout 480 python3 bench/tb_stability.py "$@" --device cuda --timer cupti --runs 2 --variants "$VARIANTS" \
      -o "$OUT/tb_stability_$n.md" --json-out "$OUT/tb_runs_$n.jsonl" --baselines-out "$OUT/h200_tb_fastest_$n.jsonl" \
      > "$OUT/tb_stability_$n.log" 2>&1
  echo "tb_stability rc=$?" >> "$OUT/tb_stability_$n.log"; tail -14 "$OUT/tb_stability_$n.log"
}
case "${PART:-A}" in
  A) stability a $L1/decode_attention_q32_kv8_d128_bf16 $L1/decode_attention_q64_kv8_d128_bf16 \
         $L1/linear_k4096_n4096_bf16 $L1/linear_bias_k3584_n512_bf16 $L1/linear_k8192_n1024_bf16 \
         $L1/rmsnorm_fwd_h4096_eps5_bf16 $L1/swiglu_fwd_i14336_bf16 $L1/gelu_quick_f4096_tok257_bf16 ;;
  B) stability b $L1/layernorm_fwd_h1024_eps5_tok257_bf16 $L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16 \
         $L1/rmsnorm_fwd_h7168_eps6_bf16 $L1/rmsnorm_unit_offset_fwd_h3072_eps6_bf16 \
         $L1/gelu_tanh_f4608_tok256_bf16 $L1/softmax_v128256_fp32 $L1/rope_q32_kv8_d128_theta10000_bf16 \
         $L2/encoder_attention_h768_heads12_n197_bf16 ;;
esac
