"""Published configurations of real models, typed in from their public model cards and config files.

Keys follow the Hugging Face config names of each model family so a user can override them by the names
they already know (``--config hidden_size=2048``). ``planner`` names the function in ``plans`` that cuts the
architecture into problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Architecture:
    key: str
    model: str  # Hugging Face id of the published checkpoint whose config this is
    family: str  # dense_llm | moe_llm | vision | audio | diffusion | multimodal
    planner: str
    config: dict[str, Any] = field(hash=False)
    dtype: str = "bfloat16"  # as the model runs
    note: str = ""


_LLAMA3_8B = dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                  intermediate_size=14336, vocab_size=128256, rms_norm_eps=1e-5, rope_theta=500000.0,
                  max_position_embeddings=8192, num_hidden_layers=32, attention_bias=False)  # fmt: skip

_VIT_B16 = dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, patch_size=16, image_size=224,
                num_channels=3, layer_norm_eps=1e-12, hidden_act="gelu", patch_bias=True, class_token=True)  # fmt: skip

ARCHITECTURES: dict[str, Architecture] = {
    a.key: a
    for a in (
        Architecture("llama3-8b", "meta-llama/Meta-Llama-3-8B", "dense_llm", "dense_llm", _LLAMA3_8B),
        Architecture(
            "llama3-70b", "meta-llama/Meta-Llama-3-70B", "dense_llm", "dense_llm",
            {**_LLAMA3_8B, "hidden_size": 8192, "num_attention_heads": 64, "intermediate_size": 28672,
             "num_hidden_layers": 80},
        ),
        Architecture(
            "mistral-7b", "mistralai/Mistral-7B-v0.1", "dense_llm", "dense_llm",
            {**_LLAMA3_8B, "vocab_size": 32000, "rope_theta": 10000.0, "max_position_embeddings": 32768},
        ),
        Architecture(
            "qwen2.5-7b", "Qwen/Qwen2.5-7B", "dense_llm", "dense_llm",
            dict(hidden_size=3584, num_attention_heads=28, num_key_value_heads=4, head_dim=128,
                 intermediate_size=18944, vocab_size=152064, rms_norm_eps=1e-6, rope_theta=1000000.0,
                 max_position_embeddings=131072, num_hidden_layers=28, attention_bias=True),
        ),
        Architecture(
            "qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", "dense_llm", "dense_llm",
            dict(hidden_size=896, num_attention_heads=14, num_key_value_heads=2, head_dim=64,
                 intermediate_size=4864, vocab_size=151936, rms_norm_eps=1e-6, rope_theta=1000000.0,
                 max_position_embeddings=32768, num_hidden_layers=24, attention_bias=True),
        ),
        Architecture(
            "gemma-7b", "google/gemma-7b", "dense_llm", "dense_llm",
            dict(hidden_size=3072, num_attention_heads=16, num_key_value_heads=16, head_dim=256,
                 intermediate_size=24576, vocab_size=256000, rms_norm_eps=1e-6, rope_theta=10000.0,
                 max_position_embeddings=8192, num_hidden_layers=28, attention_bias=False,
                 hidden_activation="gelu_pytorch_tanh", norm_unit_offset=True),
            note="RMSNorm scales by (1 + weight); GeGLU MLP with tanh GELU.",
        ),
        Architecture(
            "mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1", "moe_llm", "moe_llm",
            {**_LLAMA3_8B, "vocab_size": 32000, "rope_theta": 1000000.0, "max_position_embeddings": 32768,
             "num_local_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": True,
             "moe_intermediate_size": 14336, "moe_module": "block_sparse_moe"},
        ),
        Architecture(
            "qwen1.5-moe-a2.7b", "Qwen/Qwen1.5-MoE-A2.7B", "moe_llm", "moe_llm",
            dict(hidden_size=2048, num_attention_heads=16, num_key_value_heads=16, head_dim=128,
                 intermediate_size=5632, vocab_size=151936, rms_norm_eps=1e-6, rope_theta=1000000.0,
                 max_position_embeddings=8192, num_hidden_layers=24, attention_bias=True, num_local_experts=60,
                 num_experts_per_tok=4, norm_topk_prob=False, moe_intermediate_size=1408,
                 shared_expert_intermediate_size=5632, moe_module="mlp"),
        ),
        Architecture(
            "deepseek-v3", "deepseek-ai/DeepSeek-V3", "moe_llm", "deepseek_v3",
            dict(hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048, n_routed_experts=256,
                 n_shared_experts=1, num_experts_per_tok=8, n_group=8, topk_group=4, routed_scaling_factor=2.5,
                 rms_norm_eps=1e-6, vocab_size=129280, num_attention_heads=128, q_lora_rank=1536,
                 kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                 num_hidden_layers=61, quant_block_size=128),
            dtype="float8_e4m3fn",
            note="Linear layers run as fp8 e4m3 GEMMs with 128x128 weight-block and 1x128 activation scales.",
        ),
        Architecture("vit-b16", "google/vit-base-patch16-224", "vision", "vit", _VIT_B16),
        Architecture(
            "clip-vit-l14", "openai/clip-vit-large-patch14", "vision", "vit",
            {**_VIT_B16, "hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096, "patch_size": 14,
             "layer_norm_eps": 1e-5, "hidden_act": "quick_gelu", "patch_bias": False},
            note="Vision tower; QuickGELU; the patch convolution has no bias.",
        ),
        Architecture(
            "siglip-so400m", "google/siglip-so400m-patch14-384", "multimodal", "vit",
            {**_VIT_B16, "hidden_size": 1152, "num_attention_heads": 16, "intermediate_size": 4304, "patch_size": 14,
             "image_size": 384, "layer_norm_eps": 1e-6, "hidden_act": "gelu_pytorch_tanh", "class_token": False},
            note="Vision tower of the SigLIP image-text model (also the encoder of several VLMs).",
        ),
        Architecture(
            "convnext-base", "facebook/convnext-base-224", "vision", "convnext",
            dict(hidden_sizes=[128, 256, 512, 1024], depths=[3, 3, 27, 3], layer_norm_eps=1e-6, image_size=224,
                 patch_size=4, num_channels=3),
        ),
        Architecture(
            "whisper-large-v3", "openai/whisper-large-v3", "audio", "whisper_encoder",
            dict(d_model=1280, encoder_attention_heads=20, encoder_ffn_dim=5120, num_mel_bins=128,
                 max_source_positions=1500, encoder_layers=32, layer_norm_eps=1e-5, activation_function="gelu"),
        ),
        Architecture(
            "dit-xl-2-256", "facebook/DiT-XL-2-256", "diffusion", "dit",
            dict(hidden_size=1152, num_heads=16, depth=28, mlp_ratio=4, patch_size=2, input_size=32, in_channels=4),
            note="Latent 32x32x4 (256x256 images) patchified by 2 into 256 tokens.",
        ),
        Architecture(
            "sd15-unet", "runwayml/stable-diffusion-v1-5", "diffusion", "unet",
            dict(block_out_channels=[320, 640, 1280, 1280], norm_num_groups=32, norm_eps=1e-5, sample_size=64,
                 time_embed_dim=1280, layers_per_block=2),
            note="UNet2DConditionModel of the 512x512 pipeline (64x64 latents).",
        ),
        Architecture(
            "llava-1.5-7b", "llava-hf/llava-1.5-7b-hf", "multimodal", "llava_projector",
            dict(vision_hidden_size=1024, text_hidden_size=4096, image_size=336, patch_size=14,
                 projector_hidden_act="gelu"),
            note="The two-layer MLP that maps CLIP ViT-L/14-336 patch features into the Vicuna-7B embedding space.",
        ),
    )
}


def get_architecture(key: str) -> Architecture:
    try:
        return ARCHITECTURES[key]
    except KeyError:
        raise KeyError(f"unknown architecture {key!r}; known: {', '.join(sorted(ARCHITECTURES))}") from None
