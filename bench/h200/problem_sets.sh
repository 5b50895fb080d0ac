# Problem sets used by the H200 session scripts (paths relative to the repo root).
# OFFLINE_SET: 16 bundled problems across the op families (offline-agent bench, baselines first).
OFFLINE_SET="
data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16
data/problems/L1/rmsnorm_fwd_h7168_eps6_bf16
data/problems/L1/rmsnorm_unit_offset_fwd_h3072_eps6_bf16
data/problems/L1/swiglu_fwd_i14336_bf16
data/problems/L1/gelu_quick_f4096_tok257_bf16
data/problems/L1/gelu_tanh_f4608_tok256_bf16
data/problems/L1/decode_attention_q32_kv8_d128_bf16
data/problems/L1/decode_attention_q64_kv8_d128_bf16
data/problems/L1/linear_k4096_n4096_bf16
data/problems/L1/linear_bias_k3584_n512_bf16
data/problems/L1/linear_k8192_n1024_bf16
data/problems/L1/layernorm_fwd_h1024_eps5_tok257_bf16
data/problems/L1/softmax_v128256_fp32
data/problems/L1/rope_q32_kv8_d128_theta10000_bf16
data/problems/L2/encoder_attention_h768_heads12_n197_bf16
data/problems/L2/mlp_gelu_exact_k768_i3072_n768_tok197_bf16
"
# Two halves of OFFLINE_SET, one per GPU, each mixing families so neither half is build-heavy.
HALF0=$(echo $OFFLINE_SET | tr ' ' '\n' | awk 'NR % 2 == 1')
HALF1=$(echo $OFFLINE_SET | tr ' ' '\n' | awk 'NR % 2 == 0')
# CAMPAIGN_SET: 10 problems for the solforge run throughput bench.
CAMPAIGN_SET=$(echo $OFFLINE_SET | tr ' ' '\n' | head -10)
# TRITON_SET: 10 problems the offline agents have Triton templates for (campaign with --language triton).
TRITON_SET="
data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16
data/problems/L1/rmsnorm_fwd_h7168_eps6_bf16
data/problems/L1/rmsnorm_unit_offset_fwd_h3072_eps6_bf16
data/problems/L1/swiglu_fwd_i14336_bf16
data/problems/L1/gelu_quick_f4096_tok257_bf16
data/problems/L1/decode_attention_q32_kv8_d128_bf16
data/problems/L1/decode_attention_q64_kv8_d128_bf16
data/problems/L1/linear_k4096_n4096_bf16
data/problems/L1/linear_bias_k3584_n512_bf16
data/problems/L1/linear_k8192_n1024_bf16
"
# LINEAR_SET: the decode-shaped linear layers of OFFLINE_SET (the CUDA GEMV template's problems).
LINEAR_SET="
data/problems/L1/linear_k4096_n4096_bf16
data/problems/L1/linear_bias_k3584_n512_bf16
data/problems/L1/linear_k8192_n1024_bf16
"
# PROFILE_SET: one problem per kind of candidate for bench/launch_profile.py (host vs GPU time).
PROFILE_SET="
data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16
data/problems/L1/swiglu_fwd_i14336_bf16
data/problems/L1/decode_attention_q32_kv8_d128_bf16
data/problems/L1/linear_bias_k3584_n512_bf16
data/problems/L1/softmax_v128256_fp32
data/problems/L1/layernorm_fwd_h1024_eps5_tok257_bf16
"
# LAUNCH_SET: Triton-template problems whose candidates launch from Python (fast-launch check).
LAUNCH_SET="
data/problems/L1/decode_attention_q32_kv8_d128_bf16
data/problems/L1/decode_attention_q64_kv8_d128_bf16
data/problems/L1/rmsnorm_fwd_h4096_eps5_bf16
data/problems/L1/swiglu_fwd_i14336_bf16
data/problems/L1/linear_bias_k3584_n512_bf16
"
# NEW_SET: the problems whose offline candidates changed in session 4 (LayerNorm, softmax, attention launch).
NEW_SET="
data/problems/L1/layernorm_fwd_h1024_eps5_tok257_bf16
data/problems/L1/softmax_v128256_fp32
data/problems/L1/decode_attention_q32_kv8_d128_bf16
data/problems/L1/decode_attention_q64_kv8_d128_bf16
"
# FIRST_RUN_SET: problems whose CUDA templates (decode attention, RoPE) had never run on a GPU (session 5).
FIRST_RUN_SET="
data/problems/L1/decode_attention_q32_kv8_d128_bf16
data/problems/L1/decode_attention_q64_kv8_d128_bf16
data/problems/L1/rope_q32_kv8_d128_theta10000_bf16
"
# OFFLINE_SET in two sequential halves of 8 (one single-GPU call each; session 5).
FIRST8=$(echo $OFFLINE_SET | tr ' ' '\n' | head -8)
LAST8=$(echo $OFFLINE_SET | tr ' ' '\n' | tail -8)
