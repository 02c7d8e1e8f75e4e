"""What a checkpoint's `weights/` directory needs beside model.safetensors to load anywhere:
the model's config.json and the tokenizer; LoRA adapters merged into the weights they adapt."""

from __future__ import annotations

from pathlib import Path

import torch

from .ckpt_weights import Export, write_safetensors


def merge_lora(weights: dict[str, torch.Tensor], scale: float) -> dict[str, torch.Tensor]:
    """`x.base_layer.weight` + scale · B·A → `x.weight`; adapter tensors dropped."""
    if not any(".lora_A." in name for name in weights):
        return weights
    merged: dict[str, torch.Tensor] = {}
    for name, tensor in weights.items():
        if ".lora_A." in name or ".lora_B." in name:
            continue
        if ".base_layer." in name:
            prefix, leaf = name.split(".base_layer.")
            if leaf == "weight":
                a = next(v for k, v in weights.items() if k.startswith(f"{prefix}.lora_A."))
                b = next(v for k, v in weights.items() if k.startswith(f"{prefix}.lora_B."))
                tensor = tensor + scale * (b.float() @ a.float()).to(tensor.dtype)
            merged[f"{prefix}.{leaf}"] = tensor
            continue
        if ".original_module." in name:  # the frozen copy peft keeps of a modules_to_save entry
            continue
        merged[name.replace(".modules_to_save.default.", ".")] = tensor
    return merged


def hf_exporter(lm, tokenizer, lora_cfg) -> Export:
    """export(weights_dir, state_dict) for the checkpointer: config, tokenizer, merged LoRA."""

    def export(weights_dir: Path, state_dict: dict[str, torch.Tensor]) -> None:
        if lora_cfg is not None:
            for stale in weights_dir.glob("model*.safetensors*"):
                stale.unlink()
            merged = merge_lora(state_dict, lora_cfg.alpha / lora_cfg.rank)
            write_safetensors(merged, weights_dir)
        lm.config.save_pretrained(weights_dir)
        tokenizer.save_pretrained(weights_dir)

    return export
