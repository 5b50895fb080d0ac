#!/bin/bash
# One H200, next session (written in session 7 with its device time spent). Session 7's last template changes,
# which no GPU has run yet, against its CUPTI-window numbers (T_k; T_b in parentheses), with predictions:
# - MHA block: the three q/k/v projections as one launch, column tiles narrowed until a small-M GEMM's grid
#   covers the SMs: 0.0341 ms (0.0351) -> about 0.027 ms. MLP block, narrowed tiles: 0.0301 (0.0175) -> ~0.020.
# - Element-wise: no per-element 64-bit division, contiguous (vectorisable) addresses: Triton 2.7-2.9 µs
#   (1.4-2.6) -> about 2.0 µs; the CUDA variant, 16-byte vectors, 5 µs -> about 2.5 µs.
# - Decode GEMV (CUDA): four warps per column over K slices, loop unrolled: linear k8192 n1024 16.5 µs (9.9)
#   -> about 8 µs; the others in proportion.
# - Softmax, one 128k row (CUDA, fused=True): both passes in one cooperative launch with a grid barrier:
#   12.3 µs (9.3) -> about 8 µs.
# Then (SET=OFFLINE_SET, a second call) the whole 16-problem set again on the fixed judge, and (SUITE=1, a
# call of its own) the whole GPU suite under the CUPTI window, which must hold before it becomes the default.
# T_b: the committed session-7 CUPTI records (TB_FILE to override); the quick-GELU MLP has none there, so
# measure_tb.py adds it first (--resume keeps the rest).
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave8; mkdir -p "$R"
trap 'tar czf "$OUT/wave8.tgz" -C "$R" . 2>/dev/null' EXIT
. bench/h200/problem_sets.sh
if [ -n "${SUITE:-}" ]; then
  timeout ${SUITE_TIMEOUT:-540} python3 bench/judge_gpu_suite.py --timer cupti --staging-root /tmp/suite8 \
      --out "$R/suite_cupti.md" > "$R/suite_cupti.log" 2>&1
  echo "suite rc=$?" >> "$R/suite_cupti.log"; cp "$R/suite_cupti.md" "$OUT/" 2>/dev/null
  cat "$R/suite_cupti.md" 2>/dev/null || tail -30 "$R/suite_cupti.log"
  exit 0
fi
TB=$R/tb_cupti.jsonl; cp "${TB_FILE:-docs/bench/h200_tb_cupti_session7.jsonl}" "$TB"
CHANGED="
data/problems/L2/encoder_attention_h768_heads12_n197_bf16
data/problems/L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16
data/problems/L2/mlp_gelu_quick_k1024_i4096_n1024_tok257_bf16
data/problems/L1/swiglu_fwd_i14336_bf16
data/problems/L1/gelu_quick_f4096_tok257_bf16
data/problems/L1/gelu_tanh_f4608_tok256_bf16
data/problems/L1/linear_k8192_n1024_bf16
data/problems/L1/linear_bias_k3584_n512_bf16
data/problems/L1/linear_k4096_n4096_bf16
data/problems/L1/softmax_v128256_fp32
"
timeout ${TB_TIMEOUT:-90} python3 bench/measure_tb.py $CHANGED --device cuda --timer cupti --max-workloads 1 \
    --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default -o "$TB" --resume > "$R/tb.log" 2>&1
echo "tb rc=$?" >> "$R/tb.log"; tail -4 "$R/tb.log"
S=${SET:-CHANGED}
timeout ${OFFLINE_TIMEOUT:-450} python3 bench/bench_offline_agents.py ${!S} --device cuda --timer cupti \
    --max-candidates ${CANDIDATES:-4} --problem-seconds ${PROBLEM_SECONDS:-30} --max-workloads 1 --timeout 120 \
    --baselines "$TB" --prebuild-jobs 14 --confirm 1 -o "$R/offline_$S.md" --json-out "$R/offline_$S.jsonl" \
    > "$R/offline_$S.log" 2>&1
echo "offline rc=$?" >> "$R/offline_$S.log"
cp "$R/offline_$S.md" "$R/offline_$S.jsonl" "$TB" "$OUT/" 2>/dev/null
grep -v "^built" "$R/offline_$S.log" | tail -40
