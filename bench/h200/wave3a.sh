#!/bin/bash
# H200 x2, session 3 call A: the launch pre-roll A/B on reference latencies (GPU 1), the campaign throughput on 1 GPU then 2 (rolling scheduler, judge server per
# worker; TRITON_SET, offline agents writing Triton), then the run-to-run spread of the two custom CUDA
# kernels (~50 us and ~150 us; one cold build) with the judge's launch pre-roll.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.max.sm,driver_version --format=csv > "$OUT/gpus.csv"
. bench/h200/problem_sets.sh
# on GPU 1 while the 1-GPU campaign runs on GPU 0 (no compilation: eager and CUDA-graph replay only)
CUDA_VISIBLE_DEVICES=1 timeout 100 python3 bench/preroll_ab.py $OFFLINE_SET --device cuda --preroll 0 --preroll 20 \
    -o "$OUT/preroll_ab.md" > "$OUT/preroll_ab.log" 2>&1 &
CAMPAIGN_SET_VAR=TRITON_SET CAMPAIGN_CANDIDATES=${CAMPAIGN_CANDIDATES:-16} CAMPAIGN_TIMEOUT=${CAMPAIGN_TIMEOUT:-390} \
    CAMPAIGN_ARGS='--language triton' bash bench/h200/wave2c.sh
CUDA_VISIBLE_DEVICES=0 timeout ${SPREAD_TIMEOUT:-140} python3 bench/judge_overhead.py --device cuda --repeats 3 --skip-overhead \
    --spread-filter "CUDA C++" --staging-root /tmp/suite --out "$OUT/spread_cuda.md" > "$OUT/spread_cuda.log" 2>&1
echo "spread rc=$?" >> "$OUT/spread_cuda.log"
wc -l "$OUT"/*
