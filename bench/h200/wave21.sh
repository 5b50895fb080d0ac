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
#   Outcome: right. 14.2 / 14.2 us judged (atomic desc, 8 slices, pdl off), atomic ptr 14.2, with pdl 14.7-15.0;
#   bf16 partials 15.9-16.5. 1.23x T_b, SOL 0.56 (docs/bench/h200_offline_session18_mlp.jsonl).
# PART D: W2 asked into L2 by the up projection ("w2_l2": each up CTA one cp.async.bulk.prefetch.L2 per 4 KiB
#   piece of W2, dealt round-robin: 4.7 MB requested once, at the up projection's start, where session 17's
#   per-CTA prefetch requested each weight row 4 times). The up projection leaves HBM far from busy (4.7 MB of
#   W1 in 7.1 us). Prediction: down 5.8 -> ~4-4.5 us (W2 from L2), up 7.1 -> ~7.3; the block 14.0 -> ~12.5-13.
#   Outcome: wrong. Slower everywhere: 13.82 -> 15.02 us (desc), 15.2-15.9 for the rest; up 7.08 -> 7.45,
#   down 5.97 -> 6.22. W2 found in L2 does not make the down projection faster: it is not waiting on HBM.
#   Removed after this call.
# PART E: Nsight Compute on the atomic variant's two kernels: elapsed against active cycles, the SM clock,
#   stall reasons per issued instruction, DRAM and L2 bytes. No prediction; a diagnosis of what holds each
#   kernel at 5.8-7.1 us whatever its tiles, slices or operand residency.
#   Outcome: up 8.6 us under ncu (1.83 GHz), 15.9k cycles elapsed, 11.6k active per SM (the rest ramp and tail),
#   5.8 warps per SM, 1.55M instructions (2k per warp for 6 K steps: the epilogue's exact GELU and masked
#   stores), tensor pipe 19% of active cycles, stalls mostly long scoreboard (2.3-2.5 per issue); DRAM read 5.1
#   MB. Down 7.1 us, 12.8k elapsed, 8.9k active, 11.2 warps per SM, tensor pipe 25%, long scoreboard 5.4 per
#   issue; DRAM read 6.3 MB. Neither is near a throughput limit: each CTA's short chain of dependent waits is
#   the time.
# PART F: shorter epilogues. The bias loaded before the K loop ("early_bias": in both GEMMs its load otherwise
#   waits after the loop, a long-scoreboard stall on the critical path) and h stored by the copy engine
#   ("h_store": one TMA store per tile, no per-element addresses and masks); up with 8 warps.
#   Prediction: ~0.3-0.5 us off each GEMM: the block 13.9 -> ~13.0-13.3 us.
#   Outcome: wrong. 13.86 us without either; early_bias 14.10, h_store 14.24, both 14.56 (up 6.9-7.1 -> 7.3-7.7);
#   8 warps 14.24; pdl 15.07. Removed after this call.
# PART G: 32-row tiles (bm, down_bm 32). 197 rows in 64-row tiles are 256 rows of work, the fourth row tile 5
#   rows of 64 (a quarter of the CTAs nearly idle, and 192 up CTAs on 132 SMs leave 60 SMs with two);
#   32-row tiles compute 224 rows in 7 row tiles (336 up CTAs), for twice the W1 tile reads.
#   Prediction: up 7.1 -> ~6 us, down about the same: the block 13.9 -> ~12.8 us; if Triton falls back to
#   mma.sync under 64 rows, no gain.
#   Outcome: wrong. 32-row tiles 15.2-21.2 us (up 7.95-8.4, down 8.0 at 32 rows) against 13.76 for 64-row
#   tiles. Nothing to remove (bm and down_bm are existing knobs).
# PART H2 (below, as "O"): the two GEMMs overlapped ("overlap", new agents/offline/templates/mlp_overlap.py):
#   the down launch is a programmatic dependent launch without gdc_wait; each down CTA waits only on the
#   arrival counters of its (row tile, slice) and of slice 0 (whose up CTAs zero the output row tile first),
#   then a proxy fence, its K loop and a bulk reduction into the output. The down CTAs fill SMs the up
#   projection's tail leaves idle (ncu: ~27-30% idle cycles in each kernel).
#   Prediction: 13.9 -> ~12-12.5 us; a hang or a mismatch would show the ordering wrong.
#   Outcome: correct everywhere, and slow: 22.7-57 us (down 21.6-32.6 us, growing with the counter count: 17, 33
#   and 65 counters at 4, 8 and 16 slices). The last CTA reset the counters in a loop of acq_rel atomic
#   exchanges, one round trip each, all counters in one 128-byte line that every down CTA polls.
# PART O2: the counters reset by one plain vector store, each counter on its own 128-byte line.
#   Prediction: the reset cost goes (~20-40 us); then 13.9 -> ~12-12.5 us as predicted for PART O.
#   Outcome: the reset was the cost (34.9 -> 15.9 us at 8 slices), but the overlap still loses: 15.4-19.3 us
#   against 13.86 unfused. The down launch spans 13-15 us from its early start and ends ~2 us after the
#   unfused one would; the up launch slows 7.1 -> 7.6-7.9 us under the polling.
# PART O3: the polls spaced by nanosleep ("poll_ns" 200 / 1000), then PART H (every row judged twice).
#   Prediction: the up launch back to ~7.1 us; the block ~13.5-14, no better than unfused.
#   Outcome: wrong. poll_ns 200 / 1000: 15.65-18.1 us, the up launch still 7.7-7.9; the knob was removed after
#   this call. PART H: the MLP 14.18 us (14.21, 14.14); table D 1.390x T_b, 11/16, median SOL 0.580
#   (docs/bench/h200_offline_agents_session18.md).
# PART P: session 17's one-launch MLP (mlp_fused.py) had the same counter reset (a loop of grid_m * SPLIT atomic
#   exchanges by its last program), now one store. Prediction: its 25.8-48 us fall by ~4-10 us (8-16 exchanges),
#   still above the unfused 13.9 (its up phase alone was 11.3-15.6 us).
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
  D) U='"bm": [64], "bn": [64], "bk": [128], "num_warps": [4], "stages": [3], "tma": [true], "graph": [true],
       "sum_in_launch": [false], "down_bn": [64], "down_bk": [64], "down_stages": [4]'
     sweep mlp_w2_l2 200 $MLP mlp "{$U, \"split\": [8], \"pdl\": [false], \"atomic\": [\"desc\"]}" \
         "{$U, \"split\": [8, 4], \"pdl\": [false, true], \"atomic\": [\"desc\", \"ptr\"], \"w2_l2\": [true]}" \
         "{$U, \"split\": [8], \"pdl\": [false], \"ws_bf16\": [true], \"atomic\": [null], \"w2_l2\": [true, false]}" ;;
  E) S=smsp__average_warps_issue_stalled
     M="gpu__time_duration.sum,gpc__cycles_elapsed.max,sm__cycles_active.avg,gpc__cycles_elapsed.avg.per_second"
     M="$M,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,sm__warps_active.avg.per_cycle_active"
     M="$M,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
     for r in long_scoreboard barrier wait membar lg_throttle mio_throttle math_pipe_throttle sleeping \
              no_instruction dispatch_stall short_scoreboard drain imc_miss branch_resolving selected not_selected; do
       M="$M,${S}_${r}_per_issue_active.ratio"; done
     timeout 200 ncu --clock-control none --target-processes all -k 'regex:_up_tma|_down_atomic_tma' -c 4 --metrics "$M" \
         python3 bench/template_sweep.py $MLP --family mlp --language triton --device cuda --timer events \
         --grid '{"pdl": [false], "split": [8]}' -o "$OUT/ncu_sweep.md" > "$OUT/ncu.txt" 2>&1
     echo "ncu rc=$?"; grep -E "^  [a-z_]+|^    [a-z]" "$OUT/ncu.txt" | head -120 ;;
  F) U='"bm": [64], "bn": [64], "bk": [128], "num_warps": [4], "stages": [3], "tma": [true], "graph": [true],
       "sum_in_launch": [false], "down_bn": [64], "down_bk": [64], "down_stages": [4], "split": [8],
       "pdl": [false], "atomic": ["desc"]'
     sweep mlp_epilogue 200 $MLP mlp "{$U}" "{$U, \"early_bias\": [true, false], \"h_store\": [true, false]}" \
         "{$U, \"early_bias\": [true], \"h_store\": [true], \"num_warps\": [8], \"down_num_warps\": [4]}" \
         "{$U, \"early_bias\": [true], \"h_store\": [true], \"pdl\": [true]}" \
         "{$U, \"early_bias\": [true], \"h_store\": [true], \"atomic\": [\"ptr\"]}"
     sed -n '/GPU activities/,$p' "$OUT/sweep_mlp_epilogue.md" | head -24 ;;
  G) U='"bk": [128], "num_warps": [4], "tma": [true], "graph": [true], "sum_in_launch": [false], "down_bn": [64],
       "down_bk": [64], "down_stages": [4], "pdl": [false], "atomic": ["desc"], "fit": [false]'
     sweep mlp_bm32 200 $MLP mlp "{$U, \"bm\": [64], \"bn\": [64], \"stages\": [3], \"split\": [8]}" \
         "{$U, \"bm\": [32], \"bn\": [64, 128], \"stages\": [3, 4], \"down_bm\": [32, 64], \"split\": [8]}" \
         "{$U, \"bm\": [32], \"bn\": [64], \"stages\": [3], \"down_bm\": [32], \"split\": [4, 16]}" \
         "{$U, \"bm\": [64], \"bn\": [64], \"stages\": [3], \"down_bm\": [32], \"split\": [8, 4]}"
     sed -n '/GPU activities/,$p' "$OUT/sweep_mlp_bm32.md" | head -24 ;;
  P) U='"bm": [64], "bn": [64], "bk": [128], "num_warps": [4], "stages": [3], "tma": [true], "graph": [true],
       "down_bn": [64], "down_bk": [64], "down_stages": [4], "pdl": [false]'
     sweep mlp_fused_reset 120 $MLP mlp "{$U, \"split\": [8], \"atomic\": [\"desc\"]}" \
         "{$U, \"fused\": [true], \"split\": [2, 4], \"bn\": [64, 128], \"prefetch\": [true, false]}" ;;
  O3) U='"bm": [64], "bn": [64], "bk": [128], "num_warps": [4], "stages": [3], "tma": [true], "graph": [true],
       "down_bn": [64], "down_bk": [64], "down_stages": [4], "pdl": [false]'
     sweep mlp_overlap_poll 100 $MLP mlp "{$U, \"split\": [8], \"atomic\": [\"desc\"]}" \
         "{$U, \"overlap\": [true], \"split\": [8, 4], \"tma\": [true, false], \"poll_ns\": [200, 1000]}"
     sed -n '/GPU activities/,$p' "$OUT/sweep_mlp_overlap_poll.md" | head -12
     PART=H bash "$0" ;;
  O) U='"bm": [64], "bn": [64], "bk": [128], "num_warps": [4], "stages": [3], "tma": [true], "graph": [true],
       "down_bn": [64], "down_bk": [64], "down_stages": [4], "pdl": [false]'
     sweep mlp_overlap 150 $MLP mlp "{$U, \"split\": [8], \"atomic\": [\"desc\"]}" \
         "{$U, \"overlap\": [true], \"split\": [8, 4, 16], \"tma\": [true, false]}" \
         "{$U, \"overlap\": [true], \"split\": [8], \"down_stages\": [3], \"stages\": [2]}"
     sed -n '/GPU activities/,$p' "$OUT/sweep_mlp_overlap.md" | head -24 ;;
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
