#!/bin/bash
# One H200, session 7: after the clock backstop compares with empty calls timed beside the timed ones (CUPTI
# window) and the MLP/MHA Triton templates replay their launches as one CUDA graph.
# 1. offline agents under the CUPTI window on the problems wave6 left open (false clock alarms: RoPE, RMSNorm
#    h7168, MLP; the MHA/MLP launch gaps; decode attention q64 cut by the time box), T_b from wave6's
#    tb_cupti.jsonl (STATE=DIR in the carried tree; else TB_FILE, by default the committed session-7 records);
# 2. the anti-cheat entries of the GPU suite that a window timer could miss, under the CUPTI window.
set -u
TB=${STATE:+$STATE/tb_cupti.jsonl}; TB=${TB:-${TB_FILE:-docs/bench/h200_tb_cupti_session7.jsonl}}
OUT=${OUT:-h200-out}; mkdir -p "$OUT"
R=/tmp/wave7; mkdir -p "$R"
trap 'tar czf "$OUT/wave7.tgz" -C "$R" . 2>/dev/null' EXIT
SET="
data/problems/L2/encoder_attention_h768_heads12_n197_bf16
data/problems/L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16
data/problems/L1/rope_q32_kv8_d128_theta10000_bf16
data/problems/L1/rmsnorm_fwd_h7168_eps6_bf16
data/problems/L1/decode_attention_q64_kv8_d128_bf16
"
timeout ${OFFLINE_TIMEOUT:-300} python3 bench/bench_offline_agents.py $SET --device cuda --timer cupti \
    --max-candidates ${CANDIDATES:-4} --problem-seconds ${PROBLEM_SECONDS:-30} --max-workloads 1 --timeout 120 \
    --baselines "$TB" --prebuild-jobs 14 --confirm 1 -o "$R/offline_cupti.md" \
    --json-out "$R/offline_cupti.jsonl" > "$R/offline_cupti.log" 2>&1
echo "offline rc=$?" >> "$R/offline_cupti.log"
cp "$R/offline_cupti.md" "$R/offline_cupti.jsonl" "$OUT/" 2>/dev/null
grep -v "^built" "$R/offline_cupti.log" | tail -45
only=""; for e in side_stream cuda_graph_spread persisting_l2 timer_patch_below_sol timer_patch_tenth skip_work_when_timed \
    rmsnorm_wide_triton; do only="$only --only $e"; done
timeout ${SUITE_TIMEOUT:-130} python3 bench/judge_gpu_suite.py $only --timer cupti --staging-root /tmp/suite7 \
    --out "$R/suite_cupti.md" > "$R/suite_cupti.log" 2>&1
echo "suite rc=$?" >> "$R/suite_cupti.log"; cat "$R/suite_cupti.md" 2>/dev/null || tail -30 "$R/suite_cupti.log"
grep -h "REWARD_HACK\|reason" "$R/suite_cupti.log" | head -20
cp "$R/suite_cupti.md" "$OUT/" 2>/dev/null
exit 0
