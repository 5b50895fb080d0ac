#!/bin/bash
# H200 x2, session 3 calls B and C: per GPU, the T_b baselines of its half of OFFLINE_SET (judge protocol
# with the launch pre-roll), then the offline agents on that half (C++ candidates prebuilt first). Per-problem
# JSON lines survive a cut; run it again (RESUME=1) on the same warm machine to go on where it stopped.
# SUITE=1 runs the judge's GPU suite (no CuTe DSL) on GPU 0 first. GPUS=1: the whole set on GPU 0.
# SET=NAME: that set of problem_sets.sh instead (each GPU gets all of it).
# STATE=DIR (in the carried tree): earlier results (tb_gpu*.jsonl, offline_gpu*.jsonl) to go on from when
# the machine is a fresh one.
set -u
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave3b; mkdir -p "$R"  # everything lands here; $OUT gets one tarball (a call returns at most 8 files)
. bench/h200/problem_sets.sh
BOX=${BOX:-520}
if [ "${GPUS:-2}" = 1 ]; then GS=0; else GS="0 1"; fi
for g in $GS; do
  (
    export CUDA_VISIBLE_DEVICES=$g
    half=HALF$g; [ "${GPUS:-2}" = 1 ] && half=OFFLINE_SET
    [ -n "${SET:-}" ] && half=$SET  # another set of problem_sets.sh, e.g. SET=LINEAR_SET
    for f in tb_gpu$g.jsonl offline_gpu$g.jsonl; do
      [ -n "${STATE:-}" ] && [ -s "$STATE/$f" ] && [ ! -s "/tmp/$f" ] && cp "$STATE/$f" "/tmp/$f"
    done
    start=$(date +%s)
    if [ "${SUITE:-0}" = 1 ] && [ $g = 0 ]; then
      timeout 260 python3 bench/judge_gpu_suite.py --out "$R/suite.md" --staging-root /tmp/suite > "$R/suite.log" 2>&1
      echo "suite rc=$?" >> "$R/suite.log"
    fi
    if [ ! -s "/tmp/tb_gpu$g.jsonl" ]; then
      timeout ${TB_TIMEOUT:-150} python3 -m solforge baseline ${!half} --device cuda --max-workloads 1 --no-save --json \
          --variants eager,compile-default,cudagraph-eager,cudagraph-compile-default --warmup 5 --iterations 30 \
          > "/tmp/tb_gpu$g.jsonl" 2> "$R/baselines_gpu$g.log"
      echo "baseline rc=$?" >> "$R/baselines_gpu$g.log"
    fi
    cp "/tmp/tb_gpu$g.jsonl" "$R/tb_gpu$g.jsonl"
    left=$(( BOX - ($(date +%s) - start) ))
    resume=""; [ "${RESUME:-0}" = 1 ] && resume="--resume"
    timeout $left python3 bench/bench_offline_agents.py ${!half} --device cuda --max-candidates ${CANDIDATES:-5} \
        --problem-seconds ${PROBLEM_SECONDS:-60} --max-workloads 1 --timeout 120 --baselines "/tmp/tb_gpu$g.jsonl" \
        --prebuild-jobs 7 -o "$R/offline_gpu$g.md" --json-out "/tmp/offline_gpu$g.jsonl" $resume \
        >> "/tmp/offline_gpu$g.log" 2>&1
    echo "rc=$?" >> "/tmp/offline_gpu$g.log"
    cp "/tmp/offline_gpu$g.jsonl" "/tmp/offline_gpu$g.log" "$R/"
  ) &
done
wait
tar czf "$OUT/wave3b.tgz" -C "$R" .
cp "$R"/offline_gpu*.jsonl "$OUT/" 2>/dev/null
tail -n 3 "$R"/*.log; wc -l "$R"/*
