#!/bin/bash
# One H200, session 4 call D: where a Python-launched candidate's extra host time in the judge's worker comes
# from (bench/worker_launch_diag.py), then the offline agents on NEW_SET alone on the machine (call C ran two
# GPUs' benches, prebuilds and compiles at once and every timing came out host-bound). T_b from call C.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave4d; mkdir -p "$R"
. bench/h200/problem_sets.sh
timeout ${DIAG_TIMEOUT:-110} python3 bench/worker_launch_diag.py data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16 --device cuda \
    --candidates 2 --staging-root /tmp/diag -o "$R/diag_rmsnorm.md" > "$R/diag.log" 2>&1
echo "diag rc=$?" >> "$R/diag.log"
timeout ${OFFLINE_TIMEOUT:-190} python3 bench/bench_offline_agents.py $NEW_SET --device cuda --max-candidates ${CANDIDATES:-4} \
    --problem-seconds ${PROBLEM_SECONDS:-35} --max-workloads 1 --timeout 120 --baselines docs/bench/h200_baselines_session4.jsonl \
    --prebuild-jobs 8 -o "$R/offline_new.md" --json-out "$R/offline_new.jsonl" > "$R/offline_new.log" 2>&1
echo "rc=$?" >> "$R/offline_new.log"
tar czf "$OUT/wave4d.tgz" -C "$R" .
cat "$R/diag_rmsnorm.md" 2>/dev/null || tail -20 "$R/diag.log"; grep -v "^built" "$R/offline_new.log" | tail -25
