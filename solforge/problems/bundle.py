"""The bundled problem set: which cuts of which architectures ship in ``data/problems``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .draft import ProblemDraft
from .extract import extract, merge, write_problems

_LLM_L1 = ("rmsnorm", "rmsnorm_bwd", "q_proj", "kv_proj", "gate_up_proj", "down_proj", "rope", "gated_act",
           "gated_act_bwd", "decode_attention")  # fmt: skip

# (architecture, cuts). Cuts shared by several models are listed under each, so every model is credited.
BUNDLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("llama3-8b", (*_LLM_L1, "lm_head", "sampling_softmax", "attention_block", "mlp_block")),
    ("llama3-70b", ("q_proj", "kv_proj", "gate_up_proj", "down_proj", "decode_attention", "attention_block",
                    "mlp_block")),
    ("mistral-7b", ("rmsnorm", "rmsnorm_bwd", "q_proj", "kv_proj", "gate_up_proj", "down_proj", "gated_act",
                    "gated_act_bwd", "rope", "embedding", "attention_block", "mlp_block")),
    ("qwen2.5-7b", ("rmsnorm", "q_proj", "kv_proj", "rope", "attention_block", "mlp_block")),
    ("qwen2.5-0.5b", ("rmsnorm", "rmsnorm_bwd", "embedding", "decoder_layer")),
    ("gemma-7b", ("rmsnorm", "gated_act", "mlp_block", "attention_block")),
    ("mixtral-8x7b", ("rmsnorm", "expert_gated_act", "router_topk", "moe_layer", "attention_block")),
    ("qwen1.5-moe-a2.7b", ("router_gate", "router_topk", "moe_layer")),
    ("deepseek-v3", ("rmsnorm", "rmsnorm_bwd", "router_topk", "q_a_proj", "kv_a_proj", "gate_up_proj", "down_proj",
                     "expert_gate_up_proj", "expert_down_proj", "expert_gated_act")),
    ("vit-b16", ("patch_embed", "layernorm", "attention_block", "activation", "mlp_block")),
    ("clip-vit-l14", ("patch_embed", "layernorm", "attention_block", "activation", "mlp_block")),
    ("siglip-so400m", ("patch_embed", "layernorm", "attention_block", "activation", "mlp_block")),
    ("convnext-base", ("patch_embed", "block_stage0", "block_stage2")),
    ("whisper-large-v3", ("conv_stem", "layernorm", "attention_block", "mlp_block")),
    ("dit-xl-2-256", ("patch_embed", "dit_block", "layernorm", "activation")),
    ("sd15-unet", ("groupnorm_silu_0", "groupnorm_silu_1", "resnet_block_0", "resnet_block_1")),
    ("llava-1.5-7b", ("projector",)),
)


def bundled_drafts() -> list[ProblemDraft]:
    drafts: list[ProblemDraft] = []
    for arch, ops in BUNDLE:
        drafts.extend(extract(arch, ops=ops))
    return merge(drafts)


def build_bundle(out_dir: Path) -> list[Path]:
    """Write the whole bundled set to ``out_dir``, replacing what was there, via a sibling temp dir."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        write_problems(bundled_drafts(), tmp)
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old.", dir=out_dir.parent))
            out_dir.rename(old / "set")
            tmp.rename(out_dir)
            shutil.rmtree(old)
        else:
            tmp.rename(out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return sorted(p.parent for p in out_dir.rglob("definition.json"))
