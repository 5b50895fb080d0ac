#!/bin/bash
# One H200, session 5 call B: which of the judge worker's steps around a timed call costs the candidate host
# time (bench/worker_launch_diag.py modes), the host time measured inside the real worker after the fix
# (set-aside zeroed, no reset per call), and the judge GPU suite as a check that the persisting-L2 cheat and
# the rest are still caught.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave5b; mkdir -p "$R"
P=data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16
timeout ${DIAG_TIMEOUT:-300} python3 bench/worker_launch_diag.py $P --device cuda --candidates 2 --staging-root /tmp/diag --modes ${MODES:-ipc+sandbox,msg,msg+reset,msg+judge,msg+reset+judge} \
    -o "$R/diag_modes.md" > "$R/diag.log" 2>&1
echo "diag rc=$?" >> "$R/diag.log"
cp "$R"/* "$OUT/"
cat "$R/diag_modes.md" 2>/dev/null || tail -30 "$R/diag.log"
timeout ${PROBE_TIMEOUT:-60} python3 bench/judge_host_probe.py $P --device cuda --staging-root /tmp/probe > "$OUT/host_probe.log" 2>&1
echo "probe rc=$?" >> "$OUT/host_probe.log"; tail -n 4 "$OUT/host_probe.log"
if [ "${SUITE:-1}" = 1 ]; then
  timeout ${SUITE_TIMEOUT:-270} python3 bench/judge_gpu_suite.py --out "$OUT/suite.md" --staging-root /tmp/suite > "$OUT/suite.log" 2>&1
  echo "suite rc=$?" >> "$OUT/suite.log"
  cat "$OUT/suite.md" 2>/dev/null || tail -n 30 "$OUT/suite.log"
fi
