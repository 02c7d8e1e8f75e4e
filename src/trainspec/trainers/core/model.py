"""The model, built from `[model]`: load (hub id, local directory or built-in), dtype, MoE router
settings, LoRA, wrapped in the chunked head the loops call (lm.py).

    model = build_model(config.model, world, seed=config.data.seed)

Built-in models (`builtin:tiny-qwen3`) ship a config only; their weights are initialised from
`seed`, so every process and every relaunch starts from the same weights. Activation
checkpointing, compile and sharding are applied afterwards by `parallel.py`.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from ..builtin import is_builtin
from ..errors import SetupError
from .hub import hub_fix, unreachable_reason
from .lm import ChunkedLM
from .sources import model_source

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ROUTER_NAMES = ("mlp.gate.", "router.")


def _hf_config(model_cfg, source: str):
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=model_cfg.trust_remote_code)
    except (OSError, ValueError) as err:
        offline = unreachable_reason(source) if source == model_cfg.name else None
        if offline:
            problem = f"cannot load {source!r}: {offline}"
            raise SetupError("model.name", problem, hub_fix(source)) from None
        raise SetupError(
            "model.name",
            f"cannot load {model_cfg.name!r}: {str(err).splitlines()[0]}",
            "name a local directory with config.json and weights, a model in the local "
            'Hugging Face cache (HF_HUB_OFFLINE=1), or the built-in "builtin:tiny-qwen3"',
        ) from None
    if model_cfg.debug.num_layers is not None:
        config.num_hidden_layers = min(config.num_hidden_layers, model_cfg.debug.num_layers)
        if getattr(config, "layer_types", None):
            config.layer_types = config.layer_types[: config.num_hidden_layers]
    config.max_position_embeddings = max(
        getattr(config, "max_position_embeddings", 0), model_cfg.seq_len
    )
    config.use_cache = False
    return config


def load_hf_model(model_cfg, seed: int) -> PreTrainedModel:
    """The Hugging Face model in optimization_dtype, on the CPU."""
    from transformers import AutoModelForCausalLM

    source = model_source(model_cfg.name, "model.name")
    config = _hf_config(model_cfg, source)
    dtype = DTYPES[model_cfg.optimization_dtype]
    has_weights = not is_builtin(model_cfg.name) and not model_cfg.debug.random_init
    if has_weights:
        model = AutoModelForCausalLM.from_pretrained(
            source,
            config=config,
            dtype=dtype,
            trust_remote_code=model_cfg.trust_remote_code,
            attn_implementation="sdpa",
        )
    else:
        torch.manual_seed(seed)
        config._attn_implementation = "sdpa"
        model = AutoModelForCausalLM.from_config(
            config, dtype=dtype, trust_remote_code=model_cfg.trust_remote_code
        )
    _apply_router_settings(model, model_cfg)
    return model


def _router_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [
        (name, module)
        for name, module in model.named_modules()
        if any(f"{name}.".endswith(part) for part in ROUTER_NAMES)
    ]


def _apply_router_settings(model: nn.Module, model_cfg) -> None:
    """MoE routers: their dtype and whether they train; dense models have none."""
    routers = _router_modules(model)
    router_dtype = DTYPES[model_cfg.moe_router_dtype]
    for _, module in routers:
        module.to(router_dtype)
        module.requires_grad_(not model_cfg.freeze_moe_router)
    if routers and hasattr(model.config, "_experts_implementation"):
        model.config._experts_implementation = (
            "grouped_mm" if model_cfg.moe_use_grouped_mm else "eager"
        )
    if routers:
        log.info(
            "MoE: %d routers in %s%s",
            len(routers),
            model_cfg.moe_router_dtype,
            ", frozen" if model_cfg.freeze_moe_router else "",
        )


def apply_lora(model: PreTrainedModel, lora_cfg) -> PreTrainedModel:
    """LoRA adapters through peft; only the adapters (and modules_to_save) train."""
    if lora_cfg is None:
        return model
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in lora_cfg.target_modules if t in present]
    if not targets:
        raise SetupError(
            "model.lora.target_modules",
            f"none of {lora_cfg.target_modules} is a module of this model",
            f"name some of: {', '.join(sorted(p for p in present if p.endswith('proj')))}",
        )
    peft_config = LoraConfig(
        r=lora_cfg.rank,
        lora_alpha=lora_cfg.alpha,
        lora_dropout=lora_cfg.dropout,
        target_modules=targets,
        modules_to_save=list(lora_cfg.modules_to_save) or None,
    )
    # LoRA injects its adapters into `model` in place: the base model is `model` itself.
    return cast("PreTrainedModel", get_peft_model(model, peft_config).get_base_model())


def build_model(model_cfg, seed: int) -> ChunkedLM:
    """The Hugging Face model (with LoRA adapters) inside the chunked head the loops call."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    lm = load_hf_model(model_cfg, seed)
    lm = apply_lora(lm, model_cfg.lora)
    chunk = model_cfg.fused_lm_head_token_chunk_size
    return ChunkedLM(lm, None if chunk == "disabled" else chunk)
