#!/bin/bash
# Session 14. The median-SOL target needs one more row at >= 0.6 (table 2 of session 13: the eight rows under
# it are seven memory-bound kernels at the device floor, and the MLP at 0.49), and the rows just above 0.6 to
# hold there when T_b is the fastest of fresh compiles. The MLP needs T_k <= ~12.3 us (now 18.0; kernels:
# up 7.72 + split down 6.21 + split sum 2.45 us; cuBLAS under torch.compile does up 6.70, down 4.33).
#
# PART A: bench/template_sweep.py over the MLP's tiles (judge's timing protocol, CUPTI): the up projection's
#   tiles with the down one pinned, then the down projection's tiles / split / in-launch sum with the up one
#   at the planned first variant; pointer loads vs tensor descriptors (tma) throughout. Then T_b as the
#   fastest of two fresh compiles for the MLP, softmax and RoPE (rows whose T_b is a compile draw).
#   Prediction: descriptor loads take the up projection from 7.7 to ~5.5 us, and a down projection of 64x64
#   or 128x64 tiles over 2-4 slices beats the 8-slice split (smaller fp32 partials to add): MLP 18 -> ~13 us.
#   Outcome: wrong. 96 tilings read 17.6-29 us; each kernel stays near its time (up 7.5-7.8, 8-slice down
#   5.7-6.1, sum 2.3-2.5); descriptors gain ~0.5 us. RoPE's T_b read 3.20 / 3.30 us (session 11's, in the
#   tables so far: 6.8), so its row falls from 0.72 to ~0.55 with its 2.6 us kernel.
# PART B: the MLP's new planned grid and RoPE's CUDA kernel with a CTA covering a token's chunks ("cover": 320
#   threads for 40 heads x 8 chunks, every load issued before the barrier), judged by bench_offline_agents
#   against PART A's T_b; then T_b fastest-of-two for the two plain linears, MHA and linear_bias.
#   Prediction: RoPE 2.6 -> ~1.9-2.0 us (one DRAM round trip less for the 64 threads that had a second chunk),
#   scoring ~0.62 against 3.2; MLP ~17.2 us.
#   Outcome: RoPE "cover" 2.1 us (256 threads 2.6, 128 3.1 in the same call): right direction, 0.60 against
#   3.2. MLP 16.7 us (predicted ~17.2), 0.51. T_b moved little for the linears (<3%), MHA 35.1, linear_bias 7.1.
# PART C: the reference-derived CUDA-graph candidates now compile the reference together with its copy into
#   the judge's outputs (replay._into), so Inductor's kernels store into them (before: Inductor's kernel, then a
#   copy kernel, e.g. gelu_quick exported_cudagraph 4.6 us against T_b 2.2). Judged on the seven memory-bound
#   rows (exported_cudagraph, then inductor_cudagraph); then T_b fastest-of-two for the decode attentions and
#   three rows whose T_b is a single older draw (gelu_quick, layernorm, swiglu).
#   Prediction: exported_cudagraph within 5% of each row's T_b: gelu_quick ~2.2 us (template 2.5), swiglu ~1.3
#   (1.44), layernorm ~2.0 (2.27); rows become ~1.0x T_b, the geomean gains ~2% (1.35 -> ~1.38).
#   Outcome: wrong. The copy is gone (gelu_quick's graph candidate 4.6 -> 2.6 us) but judged they read
#   0.06-0.57 us above the same call timed in-process (gelu_quick 2.6 vs 2.21, swiglu 1.47 vs 1.41, layernorm
#   2.34 vs 2.24, h4096 2.2 vs 1.63): no row beats its template. The layernorm T_b run was cut after 1 of 2.
# PART D: is the judged-vs-in-process offset the buffers? bench/ipc_offset.py times one compiled graph call on
#   the parent's IPC buffers, a child-owned MemPool and the child's caching allocator, interleaved.
#   Prediction: if IPC mappings cost, ipc - local ~ +0.1-0.4 us and pool - local ~ 0; otherwise all within
#   0.05 us and the offset is elsewhere (the worker's process, its context, the harness).
#   Outcome (3 rounds): gelu_quick ipc 2.45 / pool 2.32 / local 2.31 us, RMSNorm h4096 1.65 / 1.66 / 1.66: IPC
#   buffers cost +0.14 us on the 2 MB kernel, nothing on the one-row one; the rest of the offset is elsewhere.
#   The first try failed on "cuda" without an index (fixed). In-process compiles=3 on h7168: 1.89, 1.89,
#   2.93 us, the same lottery as fresh processes.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
L1=data/problems/L1 L2=data/problems/L2
MLP=$L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16
VARIANTS=eager,compile-default,cudagraph-eager,cudagraph-compile-default
stability() {  # stability NAME SECONDS PROBLEMS...
  local n=$1 s=$2; shift 2
  timeout "$s" python3 bench/tb_stability.py "$@" --device cuda --timer cupti --runs 2 --variants "$VARIANTS" \
      -o "$OUT/tb_stability_$n.md" --json-out "$OUT/tb_runs_$n.jsonl" --baselines-out "$OUT/h200_tb_fastest_$n.jsonl" \
      > "$OUT/tb_stability_$n.log" 2>&1
  echo "tb_stability rc=$?" >> "$OUT/tb_stability_$n.log"; tail -8 "$OUT/tb_stability_$n.log"
}
bench() {  # bench NAME TIMEOUT BASELINES PROBLEMS...
  local n=$1 t=$2 base=$3; shift 3
  timeout "$t" python3 bench/bench_offline_agents.py "$@" --device cuda --timer cupti \
      --max-candidates ${CANDIDATES:-9} --problem-seconds ${PROBLEM_SECONDS:-90} --max-workloads 1 --timeout 120 \
      --baselines "$base" --prebuild-jobs 14 --confirm 1 ${ONLY:+--only-groups "$ONLY"} \
      -o "$OUT/offline_$n.md" --json-out "$OUT/offline_$n.jsonl" > "$OUT/offline_$n.log" 2>&1
  echo "offline rc=$?" >> "$OUT/offline_$n.log"
  grep -v "^built" "$OUT/offline_$n.log" | tail -12
}
PIN_DOWN='"down_bm": [64], "down_bn": [128], "down_bk": [64], "down_num_warps": [4], "down_stages": [4]'
case "${PART:-A}" in
  A) python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
     timeout 330 python3 bench/template_sweep.py $MLP --family mlp --device cuda --timer cupti --kernels 4 \
       --grid '{"split": [2, 4], "sum_in_launch": [false, true], "tma": [false, true], "down_bm": [64, 128], "down_bn": [32, 64, 128]}' \
       --grid "{\"tma\": [false, true], \"bm\": [64, 128], \"bn\": [64, 128], \"num_warps\": [4, 8], $PIN_DOWN}" \
       --grid '{"split": [8, 1], "tma": [false, true], "down_bm": [64, 128], "down_bn": [32, 64, 128]}' \
       --grid "{\"tma\": [true], \"bk\": [128], \"stages\": [3], \"bm\": [64, 128], \"bn\": [64, 128], \"num_warps\": [4, 8], $PIN_DOWN}" \
       -o "$OUT/mlp_sweep.md" --json-out "$OUT/mlp_sweep.jsonl" > "$OUT/mlp_sweep.log" 2>&1
     echo "sweep rc=$?"; grep -c '^\[' "$OUT/mlp_sweep.log"; head -30 "$OUT/mlp_sweep.md"
     stability a 220 $MLP $L1/softmax_v128256_fp32 $L1/rope_q32_kv8_d128_theta10000_bf16 ;;
  B) ONLY=rope/cuda_cpp CANDIDATES=3 bench rope 150 docs/bench/h200_tb_fastest_session14_a.jsonl $L1/rope_q32_kv8_d128_theta10000_bf16
     ONLY=mlp/triton CANDIDATES=4 bench mlp 130 docs/bench/h200_tb_fastest_session14_a.jsonl $MLP
     stability b 300 $L1/linear_k8192_n1024_bf16 $L1/linear_k4096_n4096_bf16 $L2/encoder_attention_h768_heads12_n197_bf16 \
         $L1/linear_bias_k3584_n512_bf16 ;;
  C) MEM="$L1/gelu_quick_f4096_tok257_bf16 $L1/swiglu_fwd_i14336_bf16 $L1/layernorm_fwd_h1024_eps5_tok257_bf16
         $L1/rmsnorm_unit_offset_fwd_h3072_eps6_bf16 $L1/rmsnorm_fwd_h4096_eps5_bf16 $L1/rmsnorm_fwd_h7168_eps6_bf16
         $L1/gelu_tanh_f4608_tok256_bf16"
     ONLY=reference/exported_cudagraph,reference/inductor_cudagraph CANDIDATES=2 PROBLEM_SECONDS=60 \
         bench refs 290 docs/bench/h200_tb_session13_fastest_of_compiles.jsonl $MEM
     stability c 140 $L1/decode_attention_q32_kv8_d128_bf16 $L1/decode_attention_q64_kv8_d128_bf16
     stability d 150 $L1/gelu_quick_f4096_tok257_bf16 $L1/swiglu_fwd_i14336_bf16 $L1/layernorm_fwd_h1024_eps5_tok257_bf16 ;;
  D) timeout ${IPC_S:-75} python3 bench/ipc_offset.py $L1/gelu_quick_f4096_tok257_bf16 $L1/rmsnorm_fwd_h4096_eps5_bf16 \
         --device cuda --rounds 3 \
         -o "$OUT/ipc_offset.md" > "$OUT/ipc_offset.log" 2>&1
     echo "ipc_offset rc=$?"; tail -20 "$OUT/ipc_offset.log"
     # the product's T_b with fresh in-process compiles (sol_bench.baseline compiles=3): do the draws differ as
     # they did across processes (h7168: 2.88 / 2.86 / 1.92 us)?
     [ -n "${SKIP_TB:-}" ] && exit 0
     timeout 55 python3 bench/measure_tb.py $L1/rmsnorm_fwd_h7168_eps6_bf16 \
         --device cuda --timer cupti --max-workloads 1 --variants compile-default \
         --compiles 3 -o "$OUT/tb_compiles3.jsonl" > "$OUT/tb_compiles3.log" 2>&1
     echo "measure_tb rc=$?"; python3 -c "import json,sys; [print(r['problem'], r['compile_draws']) for r in map(json.loads, open(sys.argv[1]))]" "$OUT/tb_compiles3.jsonl" ;;
esac
