#!/bin/bash
# Session 15. Table B of session 14 (T_b the fastest of fresh compiles): geomean 1.339x T_b (target >= 1.38x),
# median SOL 0.557 (target >= 0.6). The geomean needs +0.48 in the sum of log speedups over 16 rows.
#
# PART A: softmax_v128256_fp32 (one 128k-wide fp32 row: 6.1 us judged, T_b 9.33) with the row resident in
#   registers (rowwise.py softmax_resident): a cluster of 16 or 8 CTAs a row exchanging (m, s) through
#   distributed shared memory, or a cooperative grid over the SMs; x read once (softmax_chunk_fused reads it
#   twice and crosses a global barrier). First bench/template_sweep.py in-process on workloads 0-3 (T = 1, 7,
#   64, 333: each point checked against the reference), then the planned variants judged (T = 1), then
#   layernorm's T_b as the fastest of two fresh compiles (its only single draw in table B).
#   Prediction: cluster 16 x 1024 ~3.0-3.5 us, grid ~4-4.5 us; the row's speedup 1.53x -> ~2.8x T_b, which
#   alone lifts the geomean to ~1.39x. Then the MHA block's attention tiles (block_m 16-64 x block_n 64-256:
#   session 10 profiled _attn_fwd at 5.2 us for 12 heads x 197 tokens, 48 CTAs each looping over 4 key
#   blocks). Prediction: block_m 16 or 32 with block_n 256 (156 / 84 CTAs, one key block) ~2.5 us for the
#   kernel, the block ~18 us (from 20.6).
#   Outcome: softmax cluster 16 x 512 judged 4.8 us (in-process 4.86; 16 x 1024 5.1, 8 CTAs 5.8-6.0, grid
#   5.8-6.5): right direction, a third of the predicted gain (1.94x T_b, SOL 0.66). Correct on T = 7, 64; the
#   T = 333 check failed to bind (template_sweep probed the large workload; fixed, re-run in PART C). MHA
#   20.5-22.4 us over the 9 tilings, _attn_fwd 4.6-5.0 us: wrong, no change.
# PART B: the judge's candidate buffers (JudgeConfig.buffers): the worker's own copies ("private", new default on
#   a GPU) against the judge's IPC-mapped tensors ("shared"). bench/buffers_ab.py judges each of the 16 rows' best
#   candidate shared, private, private (in that order, so drift hits both). T_b is timed on the judge's own
#   memory; session 14 read a 2 MB kernel 0.14 us slower on IPC buffers (bench/ipc_offset.py).
#   Prediction: private <= shared everywhere; -0.1 to -0.2 us on the 2-4 MB element-wise rows, ~0 on the
#   one-row norms; on the 17-34 MB GEMVs, if the cost scales with bytes, -0.5 to -1.5 us. Then softmax's T = 333
#   workload (its sweep failed in PART A, log not returned) and layernorm's T_b as the fastest of two compiles.
#   Outcome: wrong. Geomean private / shared 1.001 over the 16 rows (0.972-1.027, gelu_quick 1.006, linear k4096
#   0.994): the judge's default stays shared. Layernorm's T_b 2.24 / 2.24 us (session 10's draw: 2.0). The
#   T = 333 sweep failed again (the binding fix came after this call).
# PART C: softmax's slice through the copy engine (cp.async.bulk into shared memory: "bulk") against 16-byte
#   loads, 256 and 512 threads; its T = 333 and 2048 workloads checked; the planned variants judged. Then
#   decode attention with the splits of a (batch, kv head) merged inside a thread-block cluster through
#   distributed shared memory ("cluster") rather than by the last CTA to arrive through L2; checked on
#   workloads 1-2 (in-process), then the planned variants judged on both decode problems.
#   Prediction: bulk 4.9 -> ~4.2 us (the ~0.9 us that 32 KB more a CTA cost in PART A halves); decode q32
#   6.2 -> ~5.0, q64 6.5 -> ~5.3 us (two L2 round trips of the arrival path replaced by DSMEM).
#   Outcome: bulk wrong (4.99 vs 4.93 in-process, judged 5.1 vs 4.8-4.9; 11% slower at T = 333 and 2048):
#   dropped after this call, so the renderer now ignores this PART's "bulk" knob. Softmax correct at T = 333
#   and 2048. Decode right direction, smaller: q32 5.4 us (arrival variants in the same call 5.7-6.4), q64
#   5.7 (6.5-7.0); correct in-process on B=7 L=4097 and B=16 L=2048.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
L1=data/problems/L1 L2=data/problems/L2
SOFTMAX=$L1/softmax_v128256_fp32
MHA=$L2/encoder_attention_h768_heads12_n197_bf16
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
sweep() {  # sweep NAME TIMEOUT WORKLOAD PROBLEM FAMILY LANGUAGE GRID...
  local n=$1 t=$2 w=$3 prob=$4 fam=$5 lang=$6; shift 6
  local grids=(); for g in "$@"; do grids+=(--grid "$g"); done
  timeout "$t" python3 bench/template_sweep.py "$prob" --family "$fam" --language "$lang" --device cuda --timer cupti \
      --workload "$w" "${grids[@]}" -o "$OUT/sweep_$n.md" --json-out "$OUT/sweep_$n.jsonl" > "$OUT/sweep_$n.log" 2>&1
  echo "sweep $n rc=$?"; grep '^\[' "$OUT/sweep_$n.log" | cut -c1-160
}
RESIDENT='{"threads": [1024, 512], "resident": ["cluster"], "parts": [16, 8]}'
GRID='{"threads": [256, 128], "resident": ["grid"]}'
OLD='{"threads": [512], "fused": [true]}'
trap 'tar -C "$OUT" -czf "$OUT/all.tgz" --exclude all.tgz . 2>/dev/null' EXIT  # one file back: the rest may be cut
case "${PART:-A}" in
  A) sweep softmax_w0 150 0 $SOFTMAX softmax cuda_cpp "$RESIDENT" "$GRID" "$OLD"
     for w in 1 2 3; do sweep softmax_w$w 40 $w $SOFTMAX softmax cuda_cpp \
         '{"threads": [1024], "resident": ["cluster"], "parts": [16, 8]}' "$GRID"; done
     ONLY=softmax/cuda_cpp CANDIDATES=8 bench softmax 170 docs/bench/h200_tb_fastest_session14_a.jsonl $SOFTMAX
     timeout 110 python3 bench/template_sweep.py $MHA --family mha --device cuda --timer cupti --kernels 3 \
         --grid '{"block_m": [16, 32, 64], "block_n": [64, 128, 256]}' \
         -o "$OUT/sweep_mha.md" --json-out "$OUT/sweep_mha.jsonl" > "$OUT/sweep_mha.log" 2>&1
     echo "sweep mha rc=$?"; grep '^\[' "$OUT/sweep_mha.log" | cut -c1-160 ;;
  B) sweep softmax_w3 40 3 $SOFTMAX softmax cuda_cpp '{"threads": [512], "resident": ["cluster"], "parts": [16]}'
     tail -5 "$OUT/sweep_softmax_w3.log"
     R=docs/bench
     timeout 430 python3 bench/buffers_ab.py data/problems --device cuda --timer cupti --rounds shared,private,private \
         --records $R/h200_offline_session10_{changed,rest_b,rest_c,mha}.jsonl \
         $R/h200_offline_session11_{linears,pointwise,linears_c,gelus_c,rms_d,mlp_d}.jsonl \
         $R/h200_offline_session12_{linears_c,gelus}.jsonl $R/h200_offline_session13_rms_c.jsonl \
         $R/h200_offline_session14_{rope,mlp}.jsonl $R/h200_offline_session15_softmax.jsonl \
         --baselines $R/h200_tb_session10_{changed,rest}.jsonl $R/h200_tb_session11.jsonl $R/h200_tb_session11_d.jsonl \
         $R/h200_tb_session12.jsonl $R/h200_tb_session13.jsonl $R/h200_tb_session13_fastest_of_compiles.jsonl \
         $R/h200_tb_fastest_session14_{a,b,c,d}.jsonl --prebuild-jobs 14 \
         --candidate swiglu_fwd_i14336_bf16=elementwise_triton_block1024_num_warps8_fastFalse \
         -o "$OUT/buffers_ab.md" --json-out "$OUT/buffers_ab" > "$OUT/buffers_ab.log" 2>&1
     echo "buffers_ab rc=$?"; grep -v "^built\|^cached" "$OUT/buffers_ab.log" | tail -40
     stability ln 80 $L1/layernorm_fwd_h1024_eps5_tok257_bf16 ;;
  C) BULK='{"threads": [512, 256], "resident": ["cluster"], "parts": [16], "bulk": [true]}'
     sweep softmax_c0 110 0 $SOFTMAX softmax cuda_cpp "$BULK" '{"threads": [512, 256], "resident": ["cluster"], "parts": [16]}'
     for w in 3 5; do sweep softmax_c$w 25 $w $SOFTMAX softmax cuda_cpp \
         '{"threads": [512], "resident": ["cluster"], "parts": [16], "bulk": [false, true]}'; tail -2 "$OUT/sweep_softmax_c$w.log"; done
     ONLY=softmax/cuda_cpp CANDIDATES=6 bench softmax_c 110 docs/bench/h200_tb_fastest_session14_a.jsonl $SOFTMAX
     for w in 1 2; do sweep decode_q32_w$w 30 $w $L1/decode_attention_q32_kv8_d128_bf16 attention cuda_cpp \
         '{"threads": [128, 256], "waves": [2], "cluster": [true]}'; tail -2 "$OUT/sweep_decode_q32_w$w.log"; done
     ONLY=attention/cuda_cpp CANDIDATES=8 bench decode_c 170 docs/bench/h200_tb_fastest_session14_c.jsonl \
         $L1/decode_attention_q32_kv8_d128_bf16 $L1/decode_attention_q64_kv8_d128_bf16 ;;
esac
