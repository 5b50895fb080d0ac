#!/bin/bash
# H200 x2, session 4 call B. GPU 0: the judge's whole GPU suite under the launch pre-roll. GPU 1: the launch
# profile of LAUNCH_SET, where the Triton templates now launch through the compiled kernel.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave4b; mkdir -p "$R"
. bench/h200/problem_sets.sh
(
  export CUDA_VISIBLE_DEVICES=1
  timeout ${PROFILE_TIMEOUT:-330} python3 bench/launch_profile.py $LAUNCH_SET --device cuda --candidates ${PROFILE_CANDIDATES:-3} \
      --staging-root /tmp/lp -o "$R/launch_profile.md" > "$R/launch_profile.log" 2>&1
  echo "profile rc=$?" >> "$R/launch_profile.log"
) &
(
  export CUDA_VISIBLE_DEVICES=0
  timeout ${SUITE_TIMEOUT:-420} python3 bench/judge_gpu_suite.py --out "$R/suite.md" --staging-root /tmp/suite > "$R/suite.log" 2>&1
  echo "suite rc=$?" >> "$R/suite.log"
) &
wait
tar czf "$OUT/wave4b.tgz" -C "$R" .
cat "$R/suite.md" 2>/dev/null || tail -n 30 "$R/suite.log"; tail -n 3 "$R/launch_profile.log"; cat "$R/launch_profile.md" 2>/dev/null
