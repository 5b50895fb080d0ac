#!/bin/bash
# One H200, session 6 plan (written with no device time left in session 6; run in the next session).
# PART=A (at most 3x55 + 90 + 250 s, under a call's 600 s): the pre-roll overlap hole and the
#   profiler-restart cheat under each CUDA timer (CUPTI window, events + device pre-roll, events + stream
#   pre-roll), the timers A/B on reference variants, then the whole GPU suite under the CUPTI window if it
#   held there (else events + device pre-roll).
# PART=B (at most 200 + 300 s): T_b of OFFLINE_SET under the CUPTI window (bench/measure_tb.py, JSON lines kept as they
#   come), then the offline agents on SET (default FIRST8) judged with the CUPTI window against it.
# PART=C: as B on SET=LAST8; STATE=DIR (in the carried tree) holds B's tb_cupti.jsonl to go on from.
# Everything lands in /tmp/wave6 and comes back as one tarball (a call returns at most 8 files), with the
# tables beside it.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave6; mkdir -p "$R"
PART=${PART:-A}
trap 'tar czf "$OUT/wave6_$PART.tgz" -C "$R" . 2>/dev/null' EXIT
. bench/h200/problem_sets.sh
if [ "$PART" = A ]; then
  declare -A held
  for setting in "cupti stream" "events device" "events stream"; do
    set -- $setting
    timeout ${HOLE_TIMEOUT:-55} python3 bench/judge_gpu_suite.py --only preroll_overlap --only rmsnorm_wide_graph \
        --only profiler_restart --only rmsnorm_wide_pytorch --timer $1 --preroll-kind $2 --staging-root /tmp/hole_$1_$2 \
        --out "$R/hole_$1_$2.md" > "$R/hole_$1_$2.log" 2>&1
    rc=$?; held["$1 $2"]=$rc
    echo "hole $1 $2 rc=$rc" | tee -a "$R/hole_$1_$2.log"; cat "$R/hole_$1_$2.md" 2>/dev/null || tail -15 "$R/hole_$1_$2.log"
  done
  # The whole suite under the CUPTI window only if it held on the four entries above; else under the event
  # timer with the device pre-roll (the other candidate default), and the CUPTI workers' logs for the why.
  if [ "${held[cupti stream]}" = 0 ]; then SUITE_ARGS="--timer cupti"; else
    SUITE_ARGS="--timer events --preroll-kind device"
    find /tmp/hole_cupti_stream -name 'worker-*.log' | head -4 | xargs -r tail -n 30 > "$R/cupti_worker_logs.txt" 2>&1
    head -c 3000 "$R/cupti_worker_logs.txt"
  fi
  timeout ${AB_TIMEOUT:-90} python3 bench/preroll_ab.py $PROFILE_SET --device cuda --preroll 0 --preroll 20 --cupti \
      -o "$R/timer_ab.md" > "$R/timer_ab.log" 2>&1
  echo "timer ab rc=$?" >> "$R/timer_ab.log"; cat "$R/timer_ab.md" 2>/dev/null || tail -20 "$R/timer_ab.log"
  timeout ${SUITE_TIMEOUT:-250} python3 bench/judge_gpu_suite.py $SUITE_ARGS --staging-root /tmp/suite \
      --out "$R/suite.md" > "$R/suite.log" 2>&1
  echo "suite ($SUITE_ARGS) rc=$?" >> "$R/suite.log"; cat "$R/suite.md" 2>/dev/null || tail -30 "$R/suite.log"
  cp "$R/suite.md" "$R/timer_ab.md" "$OUT/" 2>/dev/null
  exit 0
fi
TB=$R/tb_cupti.jsonl
[ -n "${STATE:-}" ] && [ -s "$STATE/tb_cupti.jsonl" ] && [ ! -s "$TB" ] && cp "$STATE/tb_cupti.jsonl" "$TB"
timeout ${TB_TIMEOUT:-200} python3 bench/measure_tb.py $OFFLINE_SET --device cuda --timer cupti --max-workloads 1 \
    --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default -o "$TB" --resume > "$R/tb_cupti.log" 2>&1
echo "tb rc=$?" >> "$R/tb_cupti.log"; cp "$TB" "$OUT/"; tail -18 "$R/tb_cupti.log"
S=${SET:-FIRST8}
timeout ${OFFLINE_TIMEOUT:-300} python3 bench/bench_offline_agents.py ${!S} --device cuda --timer cupti \
    --max-candidates ${CANDIDATES:-4} --problem-seconds ${PROBLEM_SECONDS:-30} --max-workloads 1 --timeout 120 \
    --baselines "$TB" --prebuild-jobs 14 --confirm ${CONFIRM:-1} -o "$R/offline_cupti_$S.md" \
    --json-out "$R/offline_cupti_$S.jsonl" > "$R/offline_cupti_$S.log" 2>&1
echo "offline rc=$?" >> "$R/offline_cupti_$S.log"
cp "$R/offline_cupti_$S.md" "$R/offline_cupti_$S.jsonl" "$OUT/" 2>/dev/null
grep -v "^built" "$R/offline_cupti_$S.log" | tail -40
