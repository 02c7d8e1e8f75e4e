"""The model, built from `[model]`: load (hub id, local directory or built-in), dtype, MoE router
settings, LoRA, and the loss head the loop calls.

    model = build_model(config.model, world, seed=config.data.seed)

Built-in models (`builtin:tiny-qwen3`) ship a config only; their weights are initialised from
`seed`, so every process and every relaunch starts from the same weights. Activation
checkpointing, compile and sharding are applied afterwards by `parallel.py`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from .builtin import builtin_model_dir, is_builtin
from .errors import SetupError
from .world import World

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

    builtin = builtin_model_dir(model_cfg.name)
    if is_builtin(model_cfg.name) and builtin is None:
        raise SetupError(
            "model.name", f"{model_cfg.name!r} is not a built-in model", 'use "builtin:tiny-qwen3"'
        )
    source = str(builtin) if builtin else model_cfg.name
    config = _hf_config(model_cfg, source)
    dtype = DTYPES[model_cfg.optimization_dtype]
    has_weights = builtin is None and not model_cfg.debug.random_init
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


class CausalLMLoss(nn.Module):
    """Wraps the language model: forward returns the summed next-token loss of a micro-batch.

    The LM head runs over `chunk` tokens at a time (model.fused_lm_head_token_chunk_size), so the
    full [tokens, vocab] logits never exist at once; None computes them in one go.
    """

    def __init__(self, lm: PreTrainedModel, chunk: int | None) -> None:
        super().__init__()
        self.lm = lm
        self.chunk = chunk

    @property
    def layers(self) -> nn.ModuleList:
        return self.lm.get_decoder().layers

    def forward(self, input_ids, position_ids, labels, temperature=None) -> torch.Tensor:
        """The summed next-token loss of the micro-batch; with a `temperature` instead, the
        log-probability of every label under softmax(logits / temperature), flattened, 0 where
        the label is -100 (the RL trainer's per-token view)."""
        decoder = self.lm.get_decoder()
        hidden = decoder(
            input_ids=input_ids, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        head = self.lm.get_output_embeddings()
        hidden = hidden.reshape(-1, hidden.size(-1))
        labels = labels.reshape(-1)
        step = self.chunk or hidden.size(0)
        pieces = []
        for start in range(0, hidden.size(0), step):
            logits = head(hidden[start : start + step]).float()
            if temperature is not None:
                logits = logits / temperature
            pieces.append(
                nn.functional.cross_entropy(
                    logits, labels[start : start + step], ignore_index=-100, reduction="none"
                )
            )
        losses = torch.cat(pieces)
        return losses.sum() if temperature is None else -losses


def build_model(model_cfg, world: World, seed: int) -> CausalLMLoss:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    lm = load_hf_model(model_cfg, seed)
    lm = apply_lora(lm, model_cfg.lora)
    chunk = model_cfg.fused_lm_head_token_chunk_size
    return CausalLMLoss(lm, None if chunk == "disabled" else chunk)


def model_dir_of(model_cfg) -> Path | None:
    """Where the model's own files (config, tokenizer) live, for the HF export."""
    return builtin_model_dir(model_cfg.name)
