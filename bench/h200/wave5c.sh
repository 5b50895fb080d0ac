#!/bin/bash
# One H200, session 5 calls C and D, everything one at a time on the machine. DIAG=1 first: the worker
# launch diagnosis with the judge's idle gap (msg+idle vs msg+idle+poll) and the host time inside the real
# worker, unpinned and pinned to the GPU's CPUs (in calls C/D: a worker spin of 0 and 20 ms, since removed). Then the offline agents on SET (a set of problem_sets.sh)
# with the session-4 T_b (CONFIRM=N: each best judged N more times, median reported).
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave5c; mkdir -p "$R"
. bench/h200/problem_sets.sh
P=data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16
if [ "${DIAG:-1}" = 1 ]; then
  timeout ${DIAG_TIMEOUT:-120} python3 bench/worker_launch_diag.py $P --device cuda --candidates 2 --staging-root /tmp/diag \
      --modes ${MODES:-msg,msg+idle,msg+idle+poll} -o "$OUT/diag_idle.md" > "$R/diag.log" 2>&1
  echo "diag rc=$?" >> "$R/diag.log"
  timeout ${PROBE_TIMEOUT:-80} python3 bench/judge_host_probe.py $P --device cuda --staging-root /tmp/probe --pin 0,1 \
      > "$OUT/host_probe_pin.log" 2>&1
  echo "probe rc=$?" >> "$OUT/host_probe_pin.log"
  cat "$OUT/diag_idle.md" 2>/dev/null || tail -20 "$R/diag.log"; grep "pinned:" "$OUT/host_probe_pin.log"
fi
S=${SET:-FIRST8}
timeout ${OFFLINE_TIMEOUT:-330} python3 bench/bench_offline_agents.py ${!S} --device cuda --max-candidates ${CANDIDATES:-4} \
    --problem-seconds ${PROBLEM_SECONDS:-35} --max-workloads 1 --timeout 120 --baselines docs/bench/h200_baselines_session4.jsonl \
    --prebuild-jobs 14 --confirm ${CONFIRM:-0} -o "$OUT/offline_$S.md" --json-out "$OUT/offline_$S.jsonl" > "$R/offline.log" 2>&1
echo "rc=$?" >> "$R/offline.log"
cp "$R/offline.log" "$OUT/offline_$S.log"
grep -v "^built" "$R/offline.log" | tail -40
