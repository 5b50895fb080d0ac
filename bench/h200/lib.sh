#!/bin/bash
# Helpers shared by the wave scripts from session 20 on (earlier waves keep their own copies as their record).
# Each writes under $OUT; MLP names the bundled MLP block.
MLP=data/problems/L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16
bench() {  # bench NAME TIMEOUT BASELINES PROBLEMS...: the offline agents judged on PROBLEMS against BASELINES
  local n=$1 t=$2 base=$3; shift 3
  timeout "$t" python3 bench/bench_offline_agents.py "$@" --device cuda --timer cupti \
      --max-candidates ${CANDIDATES:-9} --problem-seconds ${PROBLEM_SECONDS:-90} --max-workloads 1 --timeout 120 \
      --baselines "$base" --prebuild-jobs 14 --confirm 1 ${ONLY:+--only-groups "$ONLY"} \
      -o "$OUT/offline_$n.md" --json-out "$OUT/offline_$n.jsonl" > "$OUT/offline_$n.log" 2>&1
  echo "offline rc=$?" >> "$OUT/offline_$n.log"
  grep -v "^built" "$OUT/offline_$n.log" | tail -14
}
sweep() {  # sweep NAME TIMEOUT PROBLEM FAMILY LANGUAGE WORKLOAD GRID...: bench/template_sweep.py in this process
  local n=$1 t=$2 prob=$3 fam=$4 lang=$5 w=$6; shift 6
  local grids=(); for g in "$@"; do grids+=(--grid "$g"); done
  timeout "$t" python3 bench/template_sweep.py "$prob" --family "$fam" --language "$lang" --workload "$w" --device cuda \
      --timer cupti --kernels ${KERNELS:-3} --build-jobs ${BUILD_JOBS:-14} "${grids[@]}" -o "$OUT/sweep_$n.md" \
      --json-out "$OUT/sweep_$n.jsonl" > "$OUT/sweep_$n.log" 2>&1
  echo "sweep $n rc=$?"; grep '^\[\|^prebuilt' "$OUT/sweep_$n.log" | cut -c1-220
}
# one file back: the rest may be cut by the transfer limits
trap 'tar -C "$OUT" -czf "$OUT/all.tgz" --exclude all.tgz . 2>/dev/null' EXIT
