"""The exported weights of a LoRA run equal what peft's own merge (`merge_and_unload`) gives."""

from __future__ import annotations

import torch
from peft import LoraConfig, get_peft_model

from trainspec.config import load
from trainspec.trainers.ckpt.hf_export import merge_lora
from trainspec.trainers.core.model import apply_lora, load_hf_model

TARGETS = ["q_proj", "down_proj"]
SETTINGS = {
    "model.name": "builtin:tiny-qwen3",
    "model.debug.num_layers": 1,
    "model.lora": {"rank": 4, "alpha": 8.0, "target_modules": TARGETS},
}


def base_model():
    """The same weights every call (the built-in model is initialised from the seed)."""
    return load_hf_model(load("sft", [], SETTINGS).config.model, seed=0)


def trained_adapters(model) -> None:
    """Non-zero B matrices (peft starts them at zero, which would make any merge look right)."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.1)


def test_merge_matches_peft_merge_and_unload():
    lora_cfg = load("sft", [], SETTINGS).config.model.lora
    model = apply_lora(base_model(), lora_cfg)
    trained_adapters(model)
    ours = merge_lora(model.state_dict(), lora_cfg.alpha / lora_cfg.rank)

    peft_model = get_peft_model(
        base_model(), LoraConfig(r=4, lora_alpha=8.0, target_modules=TARGETS)
    )
    adapters = {f"base_model.model.{name}": t for name, t in model.state_dict().items()}
    peft_model.load_state_dict(adapters)
    theirs = peft_model.merge_and_unload().state_dict()

    assert sorted(ours) == sorted(theirs)
    for name, tensor in theirs.items():
        torch.testing.assert_close(ours[name], tensor, msg=name)
    untouched = base_model().state_dict()
    moved = {name for name in theirs if not torch.equal(theirs[name], untouched[name])}
    assert moved and all(any(t in name for t in TARGETS) for name in moved)
