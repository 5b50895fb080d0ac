#!/bin/bash
# One H200, session 5 call E (short): the GPU's local CPUs, and the host time of a Triton call inside the
# judge's worker with the worker unpinned and pinned to them (JudgeConfig.pin_worker_cpus), twice each.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
lscpu | grep -i "numa\|^CPU(s)\|Model name" > "$OUT/lscpu.txt"; cat "$OUT/lscpu.txt"
timeout ${PROBE_TIMEOUT:-150} python3 bench/judge_host_probe.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda \
    --staging-root /tmp/probe --pin 0,1 --repeat 2 > "$OUT/host_probe_pin.log" 2>&1
echo "probe rc=$?" >> "$OUT/host_probe_pin.log"
grep -v "^ " "$OUT/host_probe_pin.log"
