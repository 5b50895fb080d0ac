#!/bin/bash
# Session 18. Session 17's verdict (table D): geomean 1.388x T_b (target >= 1.38x, crossed within drift), median
# SOL 0.563 (>= 0.6). The MLP block (15.9-16.2 us judged, T_b 17.4) decides the median: it needs <= 12.6 us.
# Its three kernels: up 7.5 us, 8-slice down 5.5, sum 2.4 (latency-bound, ncu).
#
# PART A: the split-K down projection adding its partials straight into the output ("atomic"): the up projection
#   zeroes the output (grid-stride, before its K loop), each slice reduces its tile into it in bf16, by element
#   atomics ("ptr") or by the copy engine's bulk tensor reduction ("desc", cp.reduce.async.bulk.tensor); no
#   workspace and no sum kernel. Against bf16 partials + sum kernel, in-process, 8/4/16 slices, pdl off/on.
#   Prediction: the sum kernel's 2.4 us goes, the reductions cost ~0.3: 16.0 -> ~13.5-14 us; "desc" at or
#   below "ptr" (one bulk op per tile against 64x64 element atomics).
#   Outcome: right. Every point matches. 16.21 -> 14.02 us (desc, 8 slices, pdl off), 14.11 (ptr); 4 slices
#   14.6-15.2, 16 slices 15.3-15.9; pdl no gain (14.3-14.6). Per kernel: up 7.1, down with reductions 5.8.
# PART B: the down projection in larger tiles. Both GEMMs move ~38 MB from L2 into the SMs (64x64 tiles: every
#   operand tile read 4 or 12 times) in 7.1 and 5.8 us, ~5.3-6.5 TB/s: L2 bandwidth, not HBM, bounds them.
#   With the atomics the down projection can split K further, so its tiles can grow without idling SMs:
#   128x128 tiles over 12 slices (144 CTAs) move half the bytes. Sweep down_bm/down_bn 64-128, 6-16 slices,
#   BK 64/128, 3-4 stages, 4/8 warps. Prediction: down 5.8 -> ~3.5-4 us at 128x128, the block -> ~12 us.
#   The up projection in 128x64 / 128x128 tiles (fit off, 96/48 CTAs) again, with the atomic down.
#   Prediction: no gain there (its K cannot be split under the activation; fewer CTAs than SMs).
#   Outcome: wrong. 64x64 over 8 slices stays best (13.9 us); 128x128 over 6-12 slices 14.8-17.3, 128x64
#   14.5-15.9, 64x128 14.3-16.5. The down kernel reads 5.6-6.6 us whatever the tile, the up 7.0-7.3 at 64x64
#   and 7.3-12.9 in 128-row tiles: bytes from L2 are not what bounds them.
# PART C: the MLP's 8 planned variants judged (atomic desc/ptr x pdl off/on at 8 slices, then bf16 partials).
#   Prediction: ~14 us judged, 1.24x T_b, SOL ~0.57.
# PART H: every row's best judged twice (as session 17's PART H), the MLP's from PART C's records.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
L2=data/problems/L2
MLP=$L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16
bench() {  # bench NAME TIMEOUT BASELINES PROBLEMS...
  local n=$1 t=$2 base=$3; shift 3
  timeout "$t" python3 bench/bench_offline_agents.py "$@" --device cuda --timer cupti \
      --max-candidates ${CANDIDATES:-9} --problem-seconds ${PROBLEM_SECONDS:-90} --max-workloads 1 --timeout 120 \
      --baselines "$base" --prebuild-jobs 14 --confirm 1 ${ONLY:+--only-groups "$ONLY"} \
      -o "$OUT/offline_$n.md" --json-out "$OUT/offline_$n.jsonl" > "$OUT/offline_$n.log" 2>&1
  echo "offline rc=$?" >> "$OUT/offline_$n.log"
  grep -v "^built" "$OUT/offline_$n.log" | tail -14
}
sweep() {  # sweep NAME TIMEOUT PROBLEM FAMILY GRID...
  local n=$1 t=$2 prob=$3 fam=$4; shift 4
  local grids=(); for g in "$@"; do grids+=(--grid "$g"); done
  timeout "$t" python3 bench/template_sweep.py "$prob" --family "$fam" --language triton --device cuda --timer cupti \
      --kernels ${KERNELS:-6} "${grids[@]}" -o "$OUT/sweep_$n.md" --json-out "$OUT/sweep_$n.jsonl" > "$OUT/sweep_$n.log" 2>&1
  echo "sweep $n rc=$?"; grep '^\[' "$OUT/sweep_$n.log" | cut -c1-200
}
trap 'tar -C "$OUT" -czf "$OUT/all.tgz" --exclude all.tgz . 2>/dev/null' EXIT  # one file back: the rest may be cut
case "${PART:-A}" in
  A) nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
     python3 -c "import triton, triton.language as tl; print(triton.__version__, hasattr(tl.tensor_descriptor, 'atomic_add'))"
     U='"bm": [64], "bn": [64], "bk": [128], "num_warps": [4], "stages": [3], "tma": [true],
       "down_bn": [64], "down_bk": [64], "down_stages": [4], "graph": [true], "sum_in_launch": [false]'
     sweep mlp_atomic 200 $MLP mlp "{$U, \"split\": [8], \"pdl\": [false], \"ws_bf16\": [true]}" \
         "{$U, \"split\": [8, 4, 16], \"pdl\": [false, true], \"atomic\": [\"desc\", \"ptr\"]}" \
         "{$U, \"split\": [4], \"pdl\": [true], \"ws_bf16\": [true]}" ;;
  C) ONLY=mlp/triton CANDIDATES=8 PROBLEM_SECONDS=200 bench mlp 280 docs/bench/h200_tb_fastest_session14_a.jsonl $MLP ;;
  H) R=docs/bench
     timeout 480 python3 bench/buffers_ab.py data/problems --device cuda --timer cupti --rounds shared,shared \
         --records $R/h200_offline_session10_{changed,rest_b,rest_c,mha}.jsonl \
         $R/h200_offline_session11_{linears,pointwise,linears_c,gelus_c,rms_d,mlp_d}.jsonl \
         $R/h200_offline_session12_{linears_c,gelus}.jsonl $R/h200_offline_session13_rms_c.jsonl \
         $R/h200_offline_session14_{rope,mlp}.jsonl $R/h200_offline_session15_{softmax,softmax_c,decode_c}.jsonl \
         $R/h200_offline_session16_{mlp,mha_pdl,mha}.jsonl $R/h200_offline_session17_mlp.jsonl \
         $R/h200_offline_session18_mlp.jsonl \
         --baselines $R/h200_tb_session10_{changed,rest}.jsonl $R/h200_tb_session11.jsonl $R/h200_tb_session11_d.jsonl \
         $R/h200_tb_session12.jsonl $R/h200_tb_session13.jsonl $R/h200_tb_session13_fastest_of_compiles.jsonl \
         $R/h200_tb_fastest_session14_{a,b,c,d}.jsonl $R/h200_tb_fastest_session15_ln.jsonl --prebuild-jobs 14 \
         --candidate swiglu_fwd_i14336_bf16=elementwise_triton_block1024_num_warps8_fastFalse \
         --candidate encoder_attention_h768_heads12_n197_bf16=mha_triton_bm64_bn64_bk64_num_warps4_stages6_block_m64_block_n64_splitauto_num_stages2_graphTrue_pdlTrue_fitFalse \
         -o "$OUT/rejudge.md" --json-out "$OUT/rejudge" > "$OUT/rejudge.log" 2>&1
     echo "rejudge rc=$?"; grep -v "^built\|^cached" "$OUT/rejudge.log" | tail -30 ;;
  B) U='"bm": [64], "bn": [64], "bk": [128], "num_warps": [4], "stages": [3], "tma": [true], "graph": [true],
       "sum_in_launch": [false], "pdl": [false], "atomic": ["desc"]'
     sweep mlp_down_tiles 300 $MLP mlp "{$U, \"split\": [8], \"down_bn\": [64], \"down_bk\": [64], \"down_stages\": [4]}" \
         "{$U, \"down_bm\": [128], \"down_bn\": [128], \"down_num_warps\": [8, 4], \"split\": [12, 8, 6],
           \"down_bk\": [64, 128], \"down_stages\": [3, 4]}" \
         "{$U, \"down_bm\": [128], \"down_bn\": [64], \"down_num_warps\": [8, 4], \"split\": [8, 4], \"down_bk\": [64],
           \"down_stages\": [4]}" \
         "{$U, \"down_bn\": [128], \"split\": [8, 12], \"down_bk\": [64], \"down_stages\": [4]}"
     sweep mlp_up_tiles 120 $MLP mlp "{$U, \"split\": [8], \"down_bn\": [64], \"down_bk\": [64], \"down_stages\": [4],
           \"fit\": [false], \"bm\": [128], \"bn\": [64, 128], \"num_warps\": [8, 4]}" ;;
esac
