"""Cut an architecture into problems: one planner per kind of model, reading its (possibly overridden) config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .draft import ProblemDraft
from .ops import attention, blocks, elementwise, linear, moe, norms
from .ops.common import BATCH_GENERATIVE, BATCH_VISION, DECODE_CACHE, PREFILL, TOKENS, batch_rows, token_rows


@dataclass(frozen=True)
class Cut:
    """One problem cut from a model: the op key, the problem, where in the model, and the config it used."""

    op: str
    draft: ProblemDraft
    module: str
    uses: tuple[str, ...]


def _act_dtype(dtype: str) -> str:
    # fp8 models keep activations, norms and attention in bf16; only the GEMMs are fp8.
    return "bfloat16" if dtype == "float8_e4m3fn" else dtype


def _proj(cfg: dict, dtype: str, k: int, n: int, bias: bool) -> ProblemDraft:
    if dtype == "float8_e4m3fn":
        return linear.fp8_blockscale_gemm(in_features=k, out_features=n, block=cfg.get("quant_block_size", 128),
                                          sizes=TOKENS)  # fmt: skip
    return linear.linear(in_features=k, out_features=n, bias=bias, dtype=dtype, rows=token_rows())


def _attention_cuts(cfg: dict, dtype: str) -> list[Cut]:
    h, nq, nkv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    bias, theta, eps = cfg["attention_bias"], cfg["rope_theta"], cfg["rms_norm_eps"]
    unit = bool(cfg.get("norm_unit_offset", False))
    adt = _act_dtype(dtype)
    layer = "model.layers.*"
    attn = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "attention_bias")
    norm_uses = ("hidden_size", "rms_norm_eps")
    cuts = [
        Cut("rmsnorm", norms.rmsnorm(hidden=h, eps=eps, dtype=adt, rows=token_rows(), unit_offset=unit),
            f"{layer}.input_layernorm, {layer}.post_attention_layernorm, model.norm", norm_uses),
        Cut("rmsnorm_bwd",
            norms.rmsnorm(hidden=h, eps=eps, dtype=adt, rows=token_rows(), unit_offset=unit, backward=True),
            f"{layer}.input_layernorm (backward)", norm_uses),
        Cut("q_proj", _proj(cfg, dtype, h, nq * d, bias), f"{layer}.self_attn.q_proj", attn),
        Cut("kv_proj", _proj(cfg, dtype, h, nkv * d, bias), f"{layer}.self_attn.k_proj, {layer}.self_attn.v_proj",
            attn),
        Cut("o_proj", _proj(cfg, dtype, nq * d, h, False), f"{layer}.self_attn.o_proj", attn),
        Cut("rope", elementwise.rope(q_heads=nq, kv_heads=nkv, head_dim=d, theta=theta,
                                     max_position=cfg["max_position_embeddings"], dtype=adt, rows=token_rows()),
            f"{layer}.self_attn.rotary_emb", (*attn[1:4], "rope_theta", "max_position_embeddings")),
        Cut("decode_attention", attention.decode_attention(q_heads=nq, kv_heads=nkv, head_dim=d, dtype=adt,
                                                           sizes=DECODE_CACHE),
            f"{layer}.self_attn (decode step with KV cache)", attn[1:4]),
        Cut("attention_block", attention.causal_attention_block(hidden=h, q_heads=nq, kv_heads=nkv, head_dim=d,
                                                                theta=theta, bias=bias, dtype=adt, sizes=PREFILL),
            f"{layer}.self_attn", (*attn, "rope_theta")),
        Cut("embedding", linear.embedding(vocab=cfg["vocab_size"], hidden=h, dtype=adt, rows=token_rows()),
            "model.embed_tokens", ("vocab_size", "hidden_size")),
        Cut("lm_head", linear.linear(in_features=h, out_features=cfg["vocab_size"], bias=False, dtype=adt,
                                     rows=token_rows()), "lm_head", ("vocab_size", "hidden_size")),
        Cut("sampling_softmax", elementwise.softmax(features=cfg["vocab_size"], dtype="float32", rows=token_rows()),
            "logits.float().softmax(-1) (sampling)", ("vocab_size",)),
    ]  # fmt: skip
    return cuts


def _mlp_cuts(cfg: dict, dtype: str, intermediate: int, prefix: str, op_prefix: str = "") -> list[Cut]:
    h = cfg["hidden_size"]
    adt = _act_dtype(dtype)
    act = "tanh" if cfg.get("hidden_activation") == "gelu_pytorch_tanh" else "silu"
    uses = ("hidden_size", "intermediate_size" if not op_prefix else "moe_intermediate_size")
    cuts = [
        Cut(f"{op_prefix}gate_up_proj", _proj(cfg, dtype, h, intermediate, False),
            f"{prefix}.gate_proj, {prefix}.up_proj", uses),
        Cut(f"{op_prefix}down_proj", _proj(cfg, dtype, intermediate, h, False), f"{prefix}.down_proj", uses),
        Cut(f"{op_prefix}gated_act", elementwise.gated_fwd(intermediate=intermediate, act=act, dtype=adt,
                                                           rows=token_rows()), f"{prefix}.act_fn * up", uses),
    ]  # fmt: skip
    if act == "silu":
        cuts.append(Cut(f"{op_prefix}gated_act_bwd", elementwise.swiglu_bwd(intermediate=intermediate, dtype=adt,
                                                                            rows=token_rows()),
                        f"{prefix}.act_fn * up (backward)", uses))  # fmt: skip
    if dtype != "float8_e4m3fn":
        cuts.append(Cut(f"{op_prefix}mlp_block", blocks.gated_mlp(hidden=h, intermediate=intermediate, act=act,
                                                                  dtype=adt, rows=token_rows()), prefix, uses))
    return cuts


def dense_llm(cfg: dict, dtype: str) -> list[Cut]:
    cuts = _attention_cuts(cfg, dtype) + _mlp_cuts(cfg, dtype, cfg["intermediate_size"], "model.layers.*.mlp")
    if cfg.get("hidden_activation") != "gelu_pytorch_tanh" and not cfg.get("norm_unit_offset"):
        layer = blocks.decoder_layer(
            hidden=cfg["hidden_size"], q_heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
            head_dim=cfg["head_dim"], intermediate=cfg["intermediate_size"], theta=cfg["rope_theta"],
            eps=cfg["rms_norm_eps"], bias=cfg["attention_bias"], dtype=_act_dtype(dtype), sizes=PREFILL,
        )
        cuts.append(Cut("decoder_layer", layer, "model.layers.*",
                        ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                         "intermediate_size", "rope_theta", "rms_norm_eps", "attention_bias")))  # fmt: skip
    return cuts


def moe_llm(cfg: dict, dtype: str) -> list[Cut]:
    e, k, renorm = cfg["num_local_experts"], cfg["num_experts_per_tok"], cfg["norm_topk_prob"]
    inter, shared = cfg["moe_intermediate_size"], cfg.get("shared_expert_intermediate_size", 0)
    moe_uses = ("hidden_size", "moe_intermediate_size", "num_local_experts", "num_experts_per_tok", "norm_topk_prob")
    cuts = _attention_cuts(cfg, dtype)
    experts = f"model.layers.*.{cfg.get('moe_module', 'mlp')}.experts.*"
    cuts += _mlp_cuts(cfg, dtype, inter, experts, op_prefix="expert_")
    cuts += [
        Cut("router_gate", linear.linear(in_features=cfg["hidden_size"], out_features=e, bias=False,
                                         dtype=_act_dtype(dtype), rows=token_rows()),
            "model.layers.*.mlp.gate", ("hidden_size", "num_local_experts")),
        Cut("router_topk", moe.softmax_topk(experts=e, top_k=k, renormalize=renorm, rows=token_rows()),
            "model.layers.*.mlp (routing)", moe_uses[2:]),
        Cut("moe_layer", moe.moe_layer(hidden=cfg["hidden_size"], intermediate=inter, experts=e, top_k=k,
                                       renormalize=renorm, dtype=_act_dtype(dtype), rows=token_rows(),
                                       shared_intermediate=shared),
            "model.layers.*.mlp", (*moe_uses, *(("shared_expert_intermediate_size",) if shared else ()))),
    ]  # fmt: skip
    return cuts


def deepseek_v3(cfg: dict, dtype: str) -> list[Cut]:
    h, eps, adt = cfg["hidden_size"], cfg["rms_norm_eps"], _act_dtype(dtype)
    layer = "model.layers.*"
    lora_uses = ("hidden_size", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim")
    route_uses = ("n_routed_experts", "num_experts_per_tok", "n_group", "topk_group", "routed_scaling_factor")
    cuts = [
        Cut("rmsnorm", norms.rmsnorm(hidden=h, eps=eps, dtype=adt, rows=token_rows()),
            f"{layer}.input_layernorm, {layer}.post_attention_layernorm", ("hidden_size", "rms_norm_eps")),
        Cut("rmsnorm_bwd", norms.rmsnorm(hidden=h, eps=eps, dtype=adt, rows=token_rows(), backward=True),
            f"{layer}.input_layernorm (backward)", ("hidden_size", "rms_norm_eps")),
        Cut("q_a_proj", _proj(cfg, dtype, h, cfg["q_lora_rank"], False), f"{layer}.self_attn.q_a_proj", lora_uses),
        Cut("kv_a_proj", _proj(cfg, dtype, h, cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"], False),
            f"{layer}.self_attn.kv_a_proj_with_mqa", lora_uses),
        Cut("router_topk", moe.grouped_topk(experts=cfg["n_routed_experts"], top_k=cfg["num_experts_per_tok"],
                                            groups=cfg["n_group"], top_groups=cfg["topk_group"],
                                            scale=cfg["routed_scaling_factor"], rows=token_rows()),
            f"{layer}.mlp.gate", route_uses),
    ]  # fmt: skip
    cuts += _mlp_cuts(cfg, dtype, cfg["intermediate_size"], f"{layer}.mlp (dense layers)")
    cuts += _mlp_cuts(cfg, dtype, cfg["moe_intermediate_size"], f"{layer}.mlp.experts.*", op_prefix="expert_")
    return cuts


def _vit_rows(cfg: dict):
    grid = cfg["image_size"] // cfg["patch_size"]
    return batch_rows(grid * grid + (1 if cfg.get("class_token") else 0), BATCH_VISION)


_GELU_KIND = {"gelu": "exact", "quick_gelu": "quick", "gelu_pytorch_tanh": "tanh", "gelu_new": "tanh"}


def vit(cfg: dict, dtype: str) -> list[Cut]:
    h, inter, rows = cfg["hidden_size"], cfg["intermediate_size"], _vit_rows(cfg)
    act = _GELU_KIND[cfg["hidden_act"]]
    enc = "encoder.layers.*"
    return [
        Cut("patch_embed", linear.patch_embed(channels=cfg["num_channels"], image=cfg["image_size"],
                                              patch=cfg["patch_size"], hidden=h, bias=cfg["patch_bias"], dtype=dtype,
                                              batches=BATCH_VISION),
            "embeddings.patch_embedding", ("num_channels", "image_size", "patch_size", "hidden_size", "patch_bias")),
        Cut("layernorm", norms.layernorm_fwd(hidden=h, eps=cfg["layer_norm_eps"], dtype=dtype, rows=rows),
            f"{enc}.layer_norm1, {enc}.layer_norm2", ("hidden_size", "layer_norm_eps")),
        Cut("attention_block", attention.encoder_attention_block(hidden=h, heads=cfg["num_attention_heads"],
                                                                 seq=rows.axis_defs["N"]["value"], k_bias=True,
                                                                 dtype=dtype, batches=BATCH_VISION),
            f"{enc}.self_attn", ("hidden_size", "num_attention_heads", "image_size", "patch_size")),
        Cut("activation", elementwise.activation(features=inter, act=act, dtype=dtype, rows=rows),
            f"{enc}.mlp.activation_fn", ("intermediate_size", "hidden_act")),
        Cut("mlp_block", blocks.gelu_mlp(in_features=h, hidden=inter, out_features=h, act=act, dtype=dtype,
                                         rows=rows),
            f"{enc}.mlp", ("hidden_size", "intermediate_size", "hidden_act")),
    ]  # fmt: skip


def convnext(cfg: dict, dtype: str) -> list[Cut]:
    dims, eps = cfg["hidden_sizes"], cfg["layer_norm_eps"]
    stem = cfg["image_size"] // cfg["patch_size"]
    cuts = [
        Cut("patch_embed", linear.patch_embed(channels=cfg["num_channels"], image=cfg["image_size"],
                                              patch=cfg["patch_size"], hidden=dims[0], bias=True, dtype=dtype,
                                              batches=BATCH_VISION),
            "embeddings.patch_embeddings", ("num_channels", "image_size", "patch_size", "hidden_sizes")),
    ]  # fmt: skip
    for stage in (0, 2):
        cuts.append(Cut(f"block_stage{stage}",
                        blocks.convnext_block(channels=dims[stage], spatial=stem >> stage, eps=eps, dtype=dtype,
                                              batches=BATCH_VISION),
                        f"encoder.stages.{stage}.layers.*", ("hidden_sizes", "layer_norm_eps", "image_size")))
    return cuts


def whisper_encoder(cfg: dict, dtype: str) -> list[Cut]:
    d, n = cfg["d_model"], cfg["max_source_positions"]
    rows = batch_rows(n, BATCH_GENERATIVE)
    layer = "model.encoder.layers.*"
    return [
        Cut("conv_stem", blocks.whisper_conv_stem(mel_bins=cfg["num_mel_bins"], frames=2 * n, hidden=d, dtype=dtype,
                                                  batches=BATCH_GENERATIVE),
            "model.encoder.conv1, model.encoder.conv2, model.encoder.embed_positions",
            ("num_mel_bins", "max_source_positions", "d_model")),
        Cut("layernorm", norms.layernorm_fwd(hidden=d, eps=cfg["layer_norm_eps"], dtype=dtype, rows=rows),
            f"{layer}.self_attn_layer_norm, {layer}.final_layer_norm", ("d_model", "layer_norm_eps")),
        Cut("attention_block", attention.encoder_attention_block(hidden=d, heads=cfg["encoder_attention_heads"],
                                                                 seq=n, k_bias=False, dtype=dtype,
                                                                 batches=BATCH_GENERATIVE),
            f"{layer}.self_attn", ("d_model", "encoder_attention_heads", "max_source_positions")),
        Cut("mlp_block", blocks.gelu_mlp(in_features=d, hidden=cfg["encoder_ffn_dim"], out_features=d, act="exact",
                                         dtype=dtype, rows=rows),
            f"{layer}.fc1, {layer}.fc2", ("d_model", "encoder_ffn_dim")),
    ]  # fmt: skip


def dit(cfg: dict, dtype: str) -> list[Cut]:
    h, grid = cfg["hidden_size"], cfg["input_size"] // cfg["patch_size"]
    mlp = h * cfg["mlp_ratio"]
    rows = batch_rows(grid * grid, BATCH_GENERATIVE)
    return [
        Cut("patch_embed", linear.patch_embed(channels=cfg["in_channels"], image=cfg["input_size"],
                                              patch=cfg["patch_size"], hidden=h, bias=True, dtype=dtype,
                                              batches=BATCH_GENERATIVE),
            "x_embedder.proj", ("in_channels", "input_size", "patch_size", "hidden_size")),
        Cut("dit_block", blocks.dit_block(hidden=h, heads=cfg["num_heads"], mlp_hidden=mlp, tokens=grid * grid,
                                          act="tanh", dtype=dtype, batches=BATCH_GENERATIVE),
            "blocks.*", ("hidden_size", "num_heads", "mlp_ratio", "input_size", "patch_size")),
        Cut("layernorm", norms.layernorm_fwd(hidden=h, eps=1e-6, dtype=dtype, rows=rows, affine=False),
            "blocks.*.norm1, blocks.*.norm2", ("hidden_size",)),
        Cut("activation", elementwise.activation(features=mlp, act="tanh", dtype=dtype, rows=rows),
            "blocks.*.mlp.act", ("hidden_size", "mlp_ratio")),
    ]  # fmt: skip


def unet(cfg: dict, dtype: str) -> list[Cut]:
    chans, groups, eps, size = cfg["block_out_channels"], cfg["norm_num_groups"], cfg["norm_eps"], cfg["sample_size"]
    uses = ("block_out_channels", "norm_num_groups", "norm_eps", "sample_size")
    cuts = []
    for level in (0, 1, 2):
        c, s = chans[level], size >> level
        where = f"down_blocks.{level}.resnets.*"
        cuts.append(Cut(f"groupnorm_silu_{level}", norms.groupnorm_silu(channels=c, groups=groups, spatial=s, eps=eps,
                                                                        dtype=dtype, batches=BATCH_GENERATIVE),
                        f"{where}.norm1 + nonlinearity", uses))
        cuts.append(Cut(f"resnet_block_{level}",
                        blocks.unet_resnet_block(channels=c, spatial=s, temb_dim=cfg["time_embed_dim"], groups=groups,
                                                 eps=eps, dtype=dtype, batches=BATCH_GENERATIVE),
                        f"{where}", (*uses, "time_embed_dim")))  # fmt: skip
    return cuts


def llava_projector(cfg: dict, dtype: str) -> list[Cut]:
    grid = cfg["image_size"] // cfg["patch_size"]
    rows = batch_rows(grid * grid, BATCH_GENERATIVE)
    act = _GELU_KIND[cfg["projector_hidden_act"]]
    return [
        Cut("projector", blocks.gelu_mlp(in_features=cfg["vision_hidden_size"], hidden=cfg["text_hidden_size"],
                                         out_features=cfg["text_hidden_size"], act=act, dtype=dtype, rows=rows),
            "multi_modal_projector", ("vision_hidden_size", "text_hidden_size", "image_size", "patch_size",
                                      "projector_hidden_act")),
    ]  # fmt: skip


PLANNERS: dict[str, Callable[[dict[str, Any], str], list[Cut]]] = {
    "dense_llm": dense_llm,
    "moe_llm": moe_llm,
    "deepseek_v3": deepseek_v3,
    "vit": vit,
    "convnext": convnext,
    "whisper_encoder": whisper_encoder,
    "dit": dit,
    "unet": unet,
    "llava_projector": llava_projector,
}
