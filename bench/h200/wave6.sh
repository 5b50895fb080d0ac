#!/bin/bash
# One H200, session 6 plan (written with no device time left in session 6; run in the next session).
# PART=A (~8 min): the pre-roll overlap hole under each CUDA timer (events + stream pre-roll, events + device
#   pre-roll, CUPTI window), the timers A/B on reference variants, then the whole GPU suite under the CUPTI
#   window (every cheat must still be caught with the new timer).
# PART=B (~9 min): T_b of OFFLINE_SET under the CUPTI window (bench/measure_tb.py, JSON lines kept as they
#   come), then the offline agents on SET (default FIRST8) judged with the CUPTI window against it.
# PART=C: as B on SET=LAST8; STATE=DIR (in the carried tree) holds B's tb_cupti.jsonl to go on from.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
. bench/h200/problem_sets.sh
PART=${PART:-A}
if [ "$PART" = A ]; then
  for setting in "events stream" "events device" "cupti stream"; do
    set -- $setting
    timeout ${HOLE_TIMEOUT:-60} python3 bench/judge_gpu_suite.py --only preroll_overlap --only rmsnorm_wide_graph \
        --timer $1 --preroll-kind $2 --staging-root /tmp/hole --out "$OUT/hole_$1_$2.md" > "$OUT/hole_$1_$2.log" 2>&1
    echo "hole $1 $2 rc=$?" | tee -a "$OUT/hole_$1_$2.log"; cat "$OUT/hole_$1_$2.md" 2>/dev/null
  done
  timeout ${AB_TIMEOUT:-120} python3 bench/preroll_ab.py $PROFILE_SET --device cuda --preroll 0 --preroll 20 --cupti \
      -o "$OUT/timer_ab.md" > "$OUT/timer_ab.log" 2>&1
  echo "timer ab rc=$?" >> "$OUT/timer_ab.log"; cat "$OUT/timer_ab.md" 2>/dev/null || tail -20 "$OUT/timer_ab.log"
  timeout ${SUITE_TIMEOUT:-280} python3 bench/judge_gpu_suite.py --timer cupti --staging-root /tmp/suite \
      --out "$OUT/suite_cupti.md" > "$OUT/suite_cupti.log" 2>&1
  echo "suite rc=$?" >> "$OUT/suite_cupti.log"; cat "$OUT/suite_cupti.md" 2>/dev/null || tail -30 "$OUT/suite_cupti.log"
  exit 0
fi
TB=/tmp/tb_cupti.jsonl
[ -n "${STATE:-}" ] && [ -s "$STATE/tb_cupti.jsonl" ] && [ ! -s $TB ] && cp "$STATE/tb_cupti.jsonl" $TB
timeout ${TB_TIMEOUT:-200} python3 bench/measure_tb.py $OFFLINE_SET --device cuda --timer cupti --max-workloads 1 \
    --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default -o $TB --resume > "$OUT/tb_cupti.log" 2>&1
echo "tb rc=$?" >> "$OUT/tb_cupti.log"; cp $TB "$OUT/"; tail -18 "$OUT/tb_cupti.log"
S=${SET:-FIRST8}
timeout ${OFFLINE_TIMEOUT:-300} python3 bench/bench_offline_agents.py ${!S} --device cuda --timer cupti \
    --max-candidates ${CANDIDATES:-4} --problem-seconds ${PROBLEM_SECONDS:-30} --max-workloads 1 --timeout 120 \
    --baselines $TB --prebuild-jobs 14 --confirm ${CONFIRM:-1} -o "$OUT/offline_cupti_$S.md" \
    --json-out "$OUT/offline_cupti_$S.jsonl" > "$OUT/offline_cupti_$S.log" 2>&1
echo "offline rc=$?" >> "$OUT/offline_cupti_$S.log"
grep -v "^built" "$OUT/offline_cupti_$S.log" | tail -40
