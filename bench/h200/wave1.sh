#!/bin/bash
# H200 x2, one device call: the judge's GPU suite, then overhead/spread, on GPU 0; baselines on GPU 1
# (the offline-agent problem set first, then every other bundled problem until the time box ends; the
# records are JSON lines, so a cut leaves every finished workload). Render the table afterwards with
#   python bench/bench_baseline.py <dirs> --records baselines.jsonl --device cpu --hardware H200 -o ...
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
. bench/h200/problem_sets.sh
REST=$(for d in data/problems/*/*/; do d=${d%/}; case "$OFFLINE_SET" in *"$d"*) ;; *) echo "$d";; esac; done)
nvidia-smi --query-gpu=index,name,clocks.max.sm,driver_version --format=csv > "$OUT/gpus.csv"
(
  export CUDA_VISIBLE_DEVICES=0
  timeout 340 python3 bench/judge_gpu_suite.py --out "$OUT/suite.md" --staging-root /tmp/suite > "$OUT/suite.log" 2>&1
  echo "suite rc=$?" >> "$OUT/suite.log"
  timeout 190 python3 bench/judge_overhead.py --device cuda --repeats 3 --staging-root /tmp/suite \
      --out "$OUT/overhead.md" > "$OUT/overhead.log" 2>&1
  echo "overhead rc=$?" >> "$OUT/overhead.log"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  timeout 530 python3 -m solforge baseline $OFFLINE_SET $REST --device cuda --max-workloads 1 --no-save --json \
      --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default --warmup 5 --iterations 30 \
      > "$OUT/baselines.jsonl" 2> "$OUT/baselines.log"
  echo "baseline rc=$?" >> "$OUT/baselines.log"
) &
wait
wc -l "$OUT"/*
