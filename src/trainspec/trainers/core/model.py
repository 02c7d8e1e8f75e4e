"""The model, built from `[model]`: load (hub id, local directory or built-in), dtype, MoE router
settings, LoRA, wrapped in the chunked head the loops call (lm.py).

    model = build_model(config.model, seed=config.data.seed, device_type=world.device.type)
    model = build_model(config.model, seed=0, on_meta=True)  # shapes only (rank 1, 2, ...)

Built-in models (`builtin:tiny-qwen3`) ship a config only; their weights are initialised from
`seed`, so every relaunch starts from the same weights. With several processes only rank 0
reads (or initialises) the weights, in host memory; the other ranks build the model on the meta
device and receive their shards from rank 0 once it is sharded, so no process holds a second
copy and no GPU ever holds the whole model. Activation checkpointing, compile and sharding are
applied afterwards by `parallel.py`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from ..builtin import is_builtin
from ..errors import SetupError
from .hub import hub_fix, unreachable_reason
from .lm import ChunkedLM, verify_logits
from .model_source import model_source

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


def attn_implementation(attn: str, device_type: str) -> str | None:
    """transformers' attn_implementation for `model.attn`: "auto" is flash_attention_2 on a CUDA
    GPU with flash-attn, else None (transformers' own pick: sdpa where the family supports it,
    else eager); the rest name transformers' implementations as they are."""
    if attn != "auto":
        return attn
    if device_type == "cuda":
        from transformers.utils import is_flash_attn_2_available

        if is_flash_attn_2_available():
            return "flash_attention_2"
    return None


def load_hf_model(
    model_cfg, seed: int, device_type: str = "cpu", *, on_meta: bool = False
) -> PreTrainedModel:
    """The Hugging Face model in optimization_dtype, with the attention implementation
    `model.attn` picks: on the CPU with its weights, or `on_meta` (shapes only, nothing read
    or allocated) where another rank sends the weights once the model is sharded."""
    from transformers import AutoModelForCausalLM

    source = model_source(model_cfg.name, "model.name")
    config = _hf_config(model_cfg, source)
    dtype = DTYPES[model_cfg.optimization_dtype]
    has_weights = not is_builtin(model_cfg.name) and not model_cfg.debug.random_init
    attn = attn_implementation(model_cfg.attn, device_type)
    if attn == "flash_attention_2" and model_cfg.attn == "auto":
        attn = _supported_or_default(config, attn, model_cfg)
    common = {"dtype": dtype, "trust_remote_code": model_cfg.trust_remote_code}
    try:
        if has_weights and not on_meta:
            model = AutoModelForCausalLM.from_pretrained(
                source, config=config, attn_implementation=attn, **common
            )
        else:
            torch.manual_seed(seed)
            with torch.device("meta") if on_meta else contextlib.nullcontext():
                model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, **common)
    except ValueError as err:
        if "attention implementation" not in str(err):
            raise
        family = type(config).__name__.removesuffix("Config")
        raise SetupError(
            "model.attn",
            f"{family} models do not support {model_cfg.attn!r} in transformers",
            'use attn = "auto" (an implementation the family supports) or "eager"',
        ) from None
    log.info("attention: %s", model.config._attn_implementation)
    _apply_router_settings(model, model_cfg)
    return model


def _supported_or_default(config, attn: str, model_cfg) -> str | None:
    """`attn` where the family's causal-LM class supports it, else None (transformers' pick)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:  # remote code: its class decides at load time
        return None if model_cfg.trust_remote_code else attn
    return attn if getattr(model_class, "_supports_flash_attn", False) else None


def _router_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    return [
        (name, module)
        for name, module in model.named_modules()
        if any(f"{name}.".endswith(part) for part in ROUTER_NAMES)
    ]


def computes_in_own_dtype(module: nn.Module) -> None:
    """Run `module` in its weights' dtype inside a model of another: its floating inputs are
    cast to that dtype as it is called (after any mixed-precision cast of the weights), its
    floating outputs back to the input's dtype, so a float32 router fits a bfloat16 layer and
    the other way round."""
    state: dict[str, torch.dtype] = {}

    def cast(value, to: torch.dtype):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.to(to)
        if isinstance(value, tuple):
            return tuple(cast(item, to) for item in value)
        return value

    def before(_module, args):
        floating = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]
        if floating:
            state["input"] = floating[0].dtype
        return cast(args, next(_module.parameters()).dtype)  # FSDP's unsharded ones, in a forward

    def after(_module, _args, output):
        return cast(output, state["input"]) if "input" in state else output

    module.register_forward_pre_hook(before)
    module.register_forward_hook(after)


def _apply_router_settings(model: nn.Module, model_cfg) -> None:
    """MoE routers: their dtype and whether they train; dense models have none."""
    routers = _router_modules(model)
    router_dtype = DTYPES[model_cfg.moe_router_dtype]
    for _, module in routers:
        module.to(router_dtype)
        module.requires_grad_(not model_cfg.freeze_moe_router)
        computes_in_own_dtype(module)
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


def _lora_layer(module: nn.Module) -> bool:
    """Whether peft's LoRA wraps `module` as a layer (Linear, Embedding, Conv, GPT-2's Conv1D)."""
    from transformers.pytorch_utils import Conv1D

    kinds = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, nn.Conv3d, Conv1D)
    return isinstance(module, kinds)


def lora_targets(model: nn.Module, names) -> tuple[list[str], list[str]]:
    """(target_modules, target_parameters) for peft from `model.lora.target_modules`: a name of
    layers as it is; a name of fused MoE experts (one module holding [experts, out, in]
    weights, as Qwen3-MoE, Mixtral and GPT-OSS keep them) becomes its 3-D parameters."""
    modules: list[str] = []
    parameters: set[str] = set()
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if leaf not in names:
            continue
        if _lora_layer(module):
            modules.append(leaf)
            continue
        for param_name, param in module.named_parameters(recurse=False):
            if param.ndim == 3:
                parameters.add(f"{leaf}.{param_name}")
    return sorted(set(modules)), sorted(parameters)


def apply_lora(model: PreTrainedModel, lora_cfg) -> PreTrainedModel:
    """LoRA adapters through peft; only the adapters (and modules_to_save) train."""
    if lora_cfg is None:
        return model
    from peft import LoraConfig, get_peft_model

    modules, parameters = lora_targets(model, set(lora_cfg.target_modules))
    if not modules and not parameters:
        layers = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if _lora_layer(m)}
        raise SetupError(
            "model.lora.target_modules",
            f"none of {lora_cfg.target_modules} is a layer of this model",
            f"name some of: {', '.join(sorted(layers))}",
        )
    if parameters:
        log.info("LoRA: fused MoE expert weights %s adapted as parameters", ", ".join(parameters))
    peft_config = LoraConfig(
        r=lora_cfg.rank,
        lora_alpha=lora_cfg.alpha,
        lora_dropout=lora_cfg.dropout,
        target_modules=modules or None,
        target_parameters=parameters or None,
        modules_to_save=list(lora_cfg.modules_to_save) or None,
    )
    # LoRA injects its adapters into `model` in place: the base model is `model` itself.
    return cast("PreTrainedModel", get_peft_model(model, peft_config).get_base_model())


def build_model(
    model_cfg, seed: int, device_type: str = "cpu", *, on_meta: bool = False
) -> ChunkedLM:
    """The Hugging Face model (with LoRA adapters) inside the chunked head the loops call;
    `on_meta`: shapes only, for a rank that receives its weights from rank 0 (parallel.py)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    lm = load_hf_model(model_cfg, seed, device_type, on_meta=on_meta)
    with torch.random.fork_rng(devices=[]):  # the adapters' initial weights come from `seed`
        torch.manual_seed(seed)
        lm = apply_lora(lm, model_cfg.lora)
    chunk = model_cfg.fused_lm_head_token_chunk_size
    model = ChunkedLM(lm, None if chunk == "disabled" else chunk)
    if not on_meta:  # rank 0's verdict reaches the meta ranks in parallel.py
        verify_logits(model)  # the loss is the model's loss, whatever the family does to logits
    return model
