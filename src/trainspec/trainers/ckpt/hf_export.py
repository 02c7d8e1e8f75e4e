"""The Hugging Face copy of the weights, for inference tools: a checkpoint's `step_<N>/weights/`
and the RL trainer's broadcasts to the sampler.

Every rank takes part in gathering the full state dict (FSDP shards are all-gathered); rank 0
receives it on the CPU and writes safetensors under the names the Hugging Face model uses:

- the prefixes wrappers add are dropped: `_orig_mod.` (torch.compile),
  `_checkpoint_wrapped_module.` (activation checkpointing), and the path of the Hugging Face
  model inside the training module (`lm.` of the loss wrapper);
- a tied weight (lm_head sharing the embedding) is written once, under its first name, as
  `save_pretrained` does; loading with `tie_word_embeddings` restores the other name. With
  `untie` (the broadcasts) it is written under every name: from files that name it once, vLLM's
  in-place reload leaves the output layer at the weights the server started with (measured on
  vLLM 0.32: the served log-probs then match neither step).

Large models are split into 5 GiB shards with a `model.safetensors.index.json`, like the Hub.
`hf_exporter` adds what such a directory needs beside the weights to load anywhere: the model's
config.json and the tokenizer; a LoRA run's weights are merged by peft's `merge_and_unload` and
its adapter is written beside them (a checkpoint's `step_<N>/adapter/`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import save_file
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

WRAPPER_PREFIXES = ("_orig_mod.", "_checkpoint_wrapped_module.", "_fsdp_wrapped_module.")
SHARD_BYTES = 5 * 1024**3

# Called on rank 0 once the weights are written: export(weights_dir, hf_state_dict,
# adapter_dir) adds config.json, the tokenizer files and whatever else inference needs (a LoRA
# adapter in adapter_dir, when one is given).
Export = Callable[[Path, dict[str, torch.Tensor], Path | None], None]


def clean_name(name: str) -> str:
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def hf_prefix(model: nn.Module) -> str:
    """Where the Hugging Face model sits inside `model` ("lm." in the loss wrapper, "" when
    `model` is one), found as the outermost module with `save_pretrained` and a `config`."""
    for name, module in model.named_modules():
        if hasattr(module, "save_pretrained") and hasattr(module, "config"):
            return clean_name(f"{name}.") if name else ""
    return ""


def tied_aliases(model: nn.Module) -> set[str]:
    """Names of parameters that are the same tensor as an earlier-named one (tied weights)."""
    first: dict[int, str] = {}
    aliases = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in first:
            aliases.add(clean_name(name))
        else:
            first[id(param)] = name
    return aliases


def hf_state_dict(
    state: dict[str, torch.Tensor], *, prefix: str, aliases: set[str]
) -> dict[str, torch.Tensor]:
    """The full state dict under Hugging Face names, each tensor contiguous and unshared."""
    out: dict[str, torch.Tensor] = {}
    storages: set[int] = set()
    for key, tensor in state.items():
        name = clean_name(key)
        if name in aliases or not name.startswith(prefix):
            continue
        tensor = tensor.detach().contiguous()
        pointer = tensor.untyped_storage().data_ptr()
        if pointer in storages and tensor.numel():
            tensor = tensor.clone()  # safetensors refuses tensors sharing memory
        storages.add(pointer)
        out[name[len(prefix) :]] = tensor
    return out


def _shards(weights: dict[str, torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in weights.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    return shards


def write_safetensors(weights: dict[str, torch.Tensor], weights_dir: Path) -> None:
    """`model.safetensors`, or numbered shards and their index when over SHARD_BYTES."""
    weights_dir.mkdir(parents=True, exist_ok=True)
    metadata = {"format": "pt"}
    shards = _shards(weights)
    if len(shards) == 1:
        save_file(shards[0], str(weights_dir / "model.safetensors"), metadata=metadata)
        return
    weight_map = {}
    for index, shard in enumerate(shards, start=1):
        filename = f"model-{index:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(weights_dir / filename), metadata=metadata)
        weight_map.update(dict.fromkeys(shard, filename))
    total = sum(t.numel() * t.element_size() for t in weights.values())
    index_doc = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (weights_dir / "model.safetensors.index.json").write_text(json.dumps(index_doc, indent=2))


def export_weights(
    model: nn.Module,
    weights_dir: Path,
    export: Export | None,
    *,
    is_main: bool,
    adapter_dir: Path | None = None,
    untie: bool = False,
) -> None:
    """Gather the full weights (a collective: every rank calls) and write them on rank 0; with
    `untie` a tied weight under each of its names."""
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    if not is_main:
        return
    # A module's full state dict holds its parameters and buffers, gathered into plain tensors.
    tensors = cast(dict[str, torch.Tensor], state)
    aliases = set() if untie else tied_aliases(model)
    weights = hf_state_dict(tensors, prefix=hf_prefix(model), aliases=aliases)
    write_safetensors(weights, weights_dir)
    if export is not None:
        export(weights_dir, weights, adapter_dir)


def peft_merged(lm: nn.Module, weights: dict[str, torch.Tensor]):
    """The peft model of `lm`'s LoRA config holding `weights` (the full state dict, on the
    CPU), built on the meta device and filled with them."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    lora_config = copy.deepcopy(cast("dict", lm.peft_config)["default"])
    dtype = next(iter(weights.values())).dtype
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(cast("Any", lm.config), dtype=dtype)
    peft_model = get_peft_model(skeleton, lora_config)
    base = peft_model.get_base_model()
    aliases = tied_aliases(base)  # before loading: assigning a tensor unties the alias
    # merge_and_unload adds B·A into the base weights in place: those are copied, so the
    # tensors of the live model (the CPU state dict shares them) stay as they are
    own = {k: v.clone() if ".base_layer." in k else v for k, v in weights.items()}
    missing, unexpected = base.load_state_dict(own, strict=False, assign=True)
    if unexpected or any(name not in aliases for name in missing):
        raise RuntimeError(f"LoRA export: missing {missing}, unexpected {unexpected}")
    base.tie_weights()
    return peft_model


def hf_exporter(lm, tokenizer, lora_cfg) -> Export:
    """export(weights_dir, state_dict, adapter_dir) for the checkpointer and the broadcasts:
    config and tokenizer beside the weights; with LoRA, the weights merged by peft's own
    `merge_and_unload`, and the adapter (for PeftModel.from_pretrained, vLLM) in adapter_dir."""

    def export(
        weights_dir: Path, state_dict: dict[str, torch.Tensor], adapter_dir: Path | None
    ) -> None:
        if lora_cfg is not None:
            peft_model = peft_merged(lm, state_dict)
            if adapter_dir is not None:
                peft_model.save_pretrained(adapter_dir)
                tokenizer.save_pretrained(adapter_dir)
            merged = peft_model.merge_and_unload()
            for stale in weights_dir.glob("model*.safetensors*"):
                stale.unlink()
            # a tied weight as the unmerged weights name it: once, or every name (`untie`)
            aliases = tied_aliases(merged) - set(state_dict)
            weights = hf_state_dict(merged.state_dict(), prefix="", aliases=aliases)
            write_safetensors(weights, weights_dir)
        lm.config.save_pretrained(weights_dir)
        tokenizer.save_pretrained(weights_dir)

    return export
