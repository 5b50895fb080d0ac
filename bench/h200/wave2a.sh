#!/bin/bash
# H200 x2, device call A: the offline agents on OFFLINE_SET, half per GPU (C++ candidates prebuilt first).
# Per-problem JSON lines survive a cut. Stashes .carryA (first part of the CuTe DSL bundle) in /tmp/chunks.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT" /tmp/chunks
cp .carryA/* /tmp/chunks/
. bench/h200/problem_sets.sh
for g in 0 1; do
  (
    export CUDA_VISIBLE_DEVICES=$g
    half=HALF$g
    timeout 330 python3 bench/bench_offline_agents.py ${!half} --device cuda --max-candidates 6 --max-workloads 1 --timeout 150 \
        --prebuild-jobs 12 -o "$OUT/offline_gpu$g.md" --json-out "$OUT/offline_gpu$g.jsonl" > "$OUT/offline_gpu$g.log" 2>&1
    echo "rc=$?" >> "$OUT/offline_gpu$g.log"
  ) &
done
wait
ls -la /tmp/chunks; wc -l "$OUT"/*
