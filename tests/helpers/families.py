"""Tiny random-initialised models of real Hugging Face families, built offline from their config
classes: the same code paths as the real checkpoints (attention kinds, logit processing, MoE
routers, tied embeddings), at a size a test trains in seconds.

    lm = tiny_model("gemma2")            # a Gemma2ForCausalLM with 2 layers, hidden 64
    save_tiny_model("granite", path)     # config.json + safetensors, loadable by model.name
"""

from __future__ import annotations

from pathlib import Path

import torch

VOCAB = 320

COMMON = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}

MOE = {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}

# model_type -> what differs from COMMON (the families' own distinguishing settings, set to
# values far enough from identity that a loss which skips them is visibly off)
FAMILIES: dict[str, dict] = {
    "llama": {},
    "mistral": {"sliding_window": 16},
    "qwen2": {},
    "qwen3": {"head_dim": 16},
    "qwen3_moe": {"head_dim": 16, **MOE, "decoder_sparse_step": 1},
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "gemma": {"head_dim": 16},
    "gemma2": {"head_dim": 16, "final_logit_softcapping": 0.5, "sliding_window": 16},
    "gemma3_text": {"head_dim": 16, "final_logit_softcapping": 0.5, "sliding_window": 16},
    "phi3": {},
    "olmo2": {},
    "granite": {"logits_scaling": 8.0, "embedding_multiplier": 2.0, "residual_multiplier": 0.5},
    "cohere": {"logit_scale": 0.125},
    "starcoder2": {},
    "gpt2": {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 256},
    "gpt_oss": {
        "head_dim": 16,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "max_position_embeddings": 4096,  # its YaRN settings expect at least this
    },
}


def tiny_config(family: str):
    from transformers import AutoConfig

    settings = {**COMMON, **FAMILIES[family]}
    if family == "gpt2":
        settings = {k: v for k, v in settings.items() if k in {"vocab_size", *FAMILIES["gpt2"]}}
        settings.update(bos_token_id=1, eos_token_id=2)
    return AutoConfig.for_model(family, **settings)


def tiny_model(family: str, seed: int = 0, attn: str | None = None):
    """The family's *ForCausalLM, random weights from `seed`, float32, eval mode."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    config = tiny_config(family)
    if attn is not None:
        config._attn_implementation = attn
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():  # weights far enough from 0 that softcaps and scales matter
        model.get_output_embeddings().weight.mul_(8.0)
    return model.eval()


def save_tiny_model(family: str, path: Path, seed: int = 0) -> Path:
    tiny_model(family, seed).save_pretrained(path)
    return path
