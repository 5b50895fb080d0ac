#!/bin/bash
# H200 x2, session 4 call A. GPU 0: the judge's GPU suite under the launch pre-roll (cheats and floors),
# then T_b and the offline agents on LINEAR_SET (the CUDA GEMV template's first run). GPU 1: where the
# judged latency of each kind of candidate goes (bench/launch_profile.py: host vs GPU time).
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave4a; mkdir -p "$R"
nvidia-smi --query-gpu=index,name,clocks.max.sm,driver_version --format=csv > "$R/gpus.csv"
. bench/h200/problem_sets.sh
BOX=${BOX:-540}
start=$(date +%s)
(
  export CUDA_VISIBLE_DEVICES=${PROFILE_GPU:-1}
  timeout ${PROFILE_TIMEOUT:-420} python3 bench/launch_profile.py $PROFILE_SET --device cuda --candidates ${PROFILE_CANDIDATES:-3} \
      --staging-root /tmp/lp -o "$R/launch_profile.md" > "$R/launch_profile.log" 2>&1
  echo "profile rc=$?" >> "$R/launch_profile.log"
) &
(
  export CUDA_VISIBLE_DEVICES=0
  if [ "${SUITE:-1}" = 1 ]; then
    timeout 260 python3 bench/judge_gpu_suite.py --out "$R/suite.md" --staging-root /tmp/suite > "$R/suite.log" 2>&1
    echo "suite rc=$?" >> "$R/suite.log"
  fi
  timeout ${TB_TIMEOUT:-100} python3 -m solforge baseline $LINEAR_SET --device cuda --max-workloads 1 --no-save --json \
      --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default --warmup 5 --iterations 30 \
      > "$R/tb_linear.jsonl" 2> "$R/tb_linear.log"
  echo "baseline rc=$?" >> "$R/tb_linear.log"
  left=$(( BOX - ($(date +%s) - start) ))
  timeout $left python3 bench/bench_offline_agents.py $LINEAR_SET --device cuda --max-candidates ${CANDIDATES:-4} \
      --problem-seconds ${PROBLEM_SECONDS:-45} --max-workloads 1 --timeout 120 --baselines "$R/tb_linear.jsonl" \
      --prebuild-jobs 7 -o "$R/offline_linear.md" --json-out "$R/offline_linear.jsonl" > "$R/offline_linear.log" 2>&1
  echo "rc=$?" >> "$R/offline_linear.log"
) &
wait
tar czf "$OUT/wave4a.tgz" -C "$R" .
tail -n 4 "$R"/*.log; cat "$R/launch_profile.md" 2>/dev/null
