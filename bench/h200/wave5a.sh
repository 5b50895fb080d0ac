#!/bin/bash
# One H200, session 5 call A: host time of a Triton call measured inside the judge's worker
# (bench/judge_host_probe.py) and the in-process / IPC / sandbox comparison (bench/worker_launch_diag.py);
# then the first GPU run of the CUDA decode-attention and RoPE templates: offline agents (judged) and the
# launch profile (host µs vs GPU-busy µs). Everything runs alone on the machine, one thing at a time.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave5a; mkdir -p "$R"
. bench/h200/problem_sets.sh
P=data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16
timeout ${PROBE_TIMEOUT:-50} python3 bench/judge_host_probe.py $P --device cuda --staging-root /tmp/probe > "$R/host_probe.log" 2>&1
echo "probe rc=$?" >> "$R/host_probe.log"
timeout ${DIAG_TIMEOUT:-90} python3 bench/worker_launch_diag.py $P --device cuda --candidates 2 --staging-root /tmp/diag \
    -o "$R/diag_rmsnorm.md" > "$R/diag.log" 2>&1
echo "diag rc=$?" >> "$R/diag.log"
timeout ${OFFLINE_TIMEOUT:-230} python3 bench/bench_offline_agents.py $FIRST_RUN_SET --device cuda --max-candidates ${CANDIDATES:-4} \
    --problem-seconds ${PROBLEM_SECONDS:-40} --max-workloads 1 --timeout 120 --baselines docs/bench/h200_baselines_session4.jsonl \
    --prebuild-jobs 12 -o "$R/offline_first.md" --json-out "$R/offline_first.jsonl" > "$R/offline_first.log" 2>&1
echo "rc=$?" >> "$R/offline_first.log"
timeout ${PROFILE_TIMEOUT:-110} python3 bench/launch_profile.py $FIRST_RUN_SET --device cuda --candidates 3 \
    --staging-root /tmp/lp -o "$R/launch_profile.md" > "$R/launch_profile.log" 2>&1
echo "profile rc=$?" >> "$R/launch_profile.log"
tar czf "$OUT/wave5a.tgz" -C "$R" .
tail -n 12 "$R/host_probe.log"; cat "$R/diag_rmsnorm.md" 2>/dev/null || tail -20 "$R/diag.log"
grep -v "^built" "$R/offline_first.log" | tail -30; tail -n 3 "$R/launch_profile.log"; cat "$R/launch_profile.md" 2>/dev/null
