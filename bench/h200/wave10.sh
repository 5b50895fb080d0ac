#!/bin/bash
# Not run: superseded in session 10 by wave11.sh (the same fresh T_b and bench, split to fit its changes).
# One H200, the next session (written in session 9, device time spent): the 16-problem offline bench on the
# current code, with T_b re-measured in the same session (sessions 7-9 judged against session 7's records,
# and a 2 µs kernel reads a few tenths of a µs apart from one session to the next).
# TB=1 (a call of its own, ~320 s): T_b for all 16 under the CUPTI window, into $OUT/tb_cupti_fresh.jsonl;
# commit it to docs/bench before the next calls (or carry it: TB_FILE=...).
# PART=1..3 (one call each, ~330 s): thirds of OFFLINE_SET, 5 candidates and 50 s per problem.
# Predictions against session 9's table (docs/bench/h200_offline_agents_session9.md):
# - SwiGLU's CUDA variants build now (d6a8641): 16-byte vectors, ~3 µs as on the other element-wise problems,
#   so the Triton kernel (1.5 µs) stays best.
# - Every problem: the early reference puts the plain or graph-replayed export in the first five, so no
#   row falls below its export (one-kernel problems: the export ties the templates; MLP: the template's
#   18 µs stays ahead of the export's graph).
# - Rows against a fresh T_b: the one-kernel problems' 0.84-0.95x move toward 1.0x if session 7's T_b was a
#   fast reading; the geomean stays near 1.3x, short of the 1.38x target.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave10; mkdir -p "$R"
trap 'tar czf "$OUT/wave10.tgz" -C "$R" . 2>/dev/null' EXIT
. bench/h200/problem_sets.sh
if [ -n "${TB:-}" ]; then
  timeout ${TB_TIMEOUT:-540} python3 bench/measure_tb.py $OFFLINE_SET --device cuda --timer cupti --max-workloads 1 \
      --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default -o "$R/tb_cupti_fresh.jsonl" \
      --resume > "$R/tb.log" 2>&1
  echo "tb rc=$?" >> "$R/tb.log"; cp "$R/tb_cupti_fresh.jsonl" "$OUT/"; tail -20 "$R/tb.log"
  exit 0
fi
THIRD=$(echo $OFFLINE_SET | tr ' ' '\n' | awk -v p="${PART:-1}" 'NR % 3 == p % 3')
timeout ${OFFLINE_TIMEOUT:-480} python3 bench/bench_offline_agents.py $THIRD --device cuda --timer cupti \
    --max-candidates ${CANDIDATES:-5} --problem-seconds ${PROBLEM_SECONDS:-50} --max-workloads 1 --timeout 120 \
    --baselines "${TB_FILE:-docs/bench/h200_tb_cupti_fresh.jsonl}" --prebuild-jobs 14 --confirm 1 \
    -o "$R/offline_part${PART:-1}.md" --json-out "$R/offline_part${PART:-1}.jsonl" > "$R/offline.log" 2>&1
echo "offline rc=$?" >> "$R/offline.log"
cp "$R/offline_part${PART:-1}.md" "$R/offline_part${PART:-1}.jsonl" "$OUT/" 2>/dev/null
grep -v "^built" "$R/offline.log" | tail -45
