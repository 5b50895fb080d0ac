#!/bin/bash
# One H200, session 11. Predictions against session 10's rows (docs/bench/h200_offline_agents_session10.md):
# - GEMV (CUDA): the streaming kernel (persistent CTAs; each lane's next loads issued before the current
#   step's arithmetic, across columns) against the retiring one (a CTA per column, loads drained once per
#   wave). linear k4096 12.3 -> ~10.5 us (SOL score 0.56 -> ~0.65), k8192 7.7 -> ~6.5 us, linear_bias 4.4 ->
#   ~4.0 us with eight warps per column. The retiring kernel (streamFalse) is in the same run to compare.
# - Element-wise (CUDA): four 16-byte vectors per thread, all loaded before any is computed, and
#   tanh.approx for the 16-bit activations. gelu_tanh 2.75 -> ~2.3 us (SOL score 0.59 -> ~0.66), gelu_quick
#   2.56 -> ~2.2 us; swiglu (14336 elements, one launch's latency) within noise of 1.45 us.
# - RoPE (CUDA, session 10's change, unmeasured): 2.5 -> ~2.0 us, SOL score 0.57 -> ~0.63.
# PART=A (~400 s): T_b in-process for the seven problems, then the three linears (7 candidates each).
# PART=B (~320 s): the element-wise three and RoPE against PART A's T_b (copied into docs/bench between calls).
# After A and B (streaming GEMV: -2% on k4096, a tie and a loss elsewhere; the element-wise CUDA kernel behind
# Triton on all three; RoPE 2.6 us, unchanged): the grids reordered and widened, predictions:
# PART=C (~550 s): the linears with 9 candidates (the retiring GEMV at 128 threads first: k8192 ~7.7 us as in
#   session 10, SOL score 0.56 -> ~0.6); gelu_tanh and gelu_quick over Triton's widened grid (12 points):
#   within 0.2 us of 2.7 / 2.6 us, the best block/warps found rather than a predicted gain.
# PART=D (~450 s; ran at f0e6502, its RMSNorm block cut at 200 s during h7168): T_b in-process for the
#   three RMSNorms and the MLP block, then their rows.
#   RMSNorm: the CUDA 16-byte kernel (x and weight vectors requested before the reduction; the scalar kernel
#   read 6.2-9.5 us in session 10) lands within 0.2 us of Triton's 1.7-1.9 us; 32 warps in Triton's grid: no
#   gain expected beyond noise. MLP: the down projection's split-K slices summed by the last slice of each tile
#   in the same launch (no _sum_splits kernel, 2.5 us of GPU time in session 10): 17.9 -> ~16 us.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave13; mkdir -p "$R"
trap 'tar czf "$OUT/wave13.tgz" -C "$R" . 2>/dev/null' EXIT
P=data/problems/L1
LINEARS="$P/linear_k4096_n4096_bf16 $P/linear_k8192_n1024_bf16 $P/linear_bias_k3584_n512_bf16"
POINTWISE="$P/gelu_tanh_f4608_tok256_bf16 $P/gelu_quick_f4096_tok257_bf16 $P/swiglu_fwd_i14336_bf16
  $P/rope_q32_kv8_d128_theta10000_bf16"
bench() {  # bench NAME TIMEOUT BASELINES PROBLEMS...
  local n=$1 t=$2 base=$3; shift 3
  timeout "$t" python3 bench/bench_offline_agents.py "$@" --device cuda --timer cupti \
      --max-candidates ${CANDIDATES:-7} --problem-seconds ${PROBLEM_SECONDS:-75} --max-workloads 1 --timeout 120 \
      --baselines "$base" --prebuild-jobs 14 --confirm 1 \
      -o "$R/offline_$n.md" --json-out "$R/offline_$n.jsonl" > "$R/offline_$n.log" 2>&1
  echo "offline rc=$?" >> "$R/offline_$n.log"
  cp "$R/offline_$n.md" "$R/offline_$n.jsonl" "$OUT/" 2>/dev/null
  grep -v "^built" "$R/offline_$n.log" | tail -30
}
case "${PART:-A}" in
  A) f="$R/tb_session11.jsonl"
     timeout 170 python3 bench/measure_tb.py $LINEARS $POINTWISE --device cuda --timer cupti --max-workloads 1 \
         --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default -o "$f" --resume > "$f.log" 2>&1
     echo "tb rc=$?" >> "$f.log"; cp "$f" "$OUT/"; tail -4 "$f.log"
     bench linears 300 "$f" $LINEARS ;;
  B) CANDIDATES=6 bench pointwise 330 docs/bench/h200_tb_session11.jsonl $POINTWISE ;;
  C) CANDIDATES=9 bench linears_c 300 docs/bench/h200_tb_session11.jsonl $LINEARS
     CANDIDATES=14 PROBLEM_SECONDS=100 bench gelus_c 250 docs/bench/h200_tb_session11.jsonl \
         $P/gelu_tanh_f4608_tok256_bf16 $P/gelu_quick_f4096_tok257_bf16 ;;
  D) RMS="$P/rmsnorm_fwd_h4096_eps5_bf16 $P/rmsnorm_unit_offset_fwd_h3072_eps6_bf16 $P/rmsnorm_fwd_h7168_eps6_bf16"
     MLP=data/problems/L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16
     f="$R/tb_session11_d.jsonl"
     timeout 120 python3 bench/measure_tb.py $RMS $MLP --device cuda --timer cupti --max-workloads 1 \
         --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default -o "$f" --resume > "$f.log" 2>&1
     echo "tb rc=$?" >> "$f.log"; cp "$f" "$OUT/"; tail -5 "$f.log"
     CANDIDATES=7 PROBLEM_SECONDS=60 bench rms_d 200 "$f" $RMS
     CANDIDATES=4 PROBLEM_SECONDS=100 bench mlp_d 130 "$f" $MLP ;;
esac
