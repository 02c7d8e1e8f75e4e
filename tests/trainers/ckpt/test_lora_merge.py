"""A LoRA run's export: the weights are what peft's own `merge_and_unload` gives (GPT-2's Conv1D
layers, which store their weight transposed, included), and the adapter loads back with
`PeftModel.from_pretrained` onto the base model with the same logits."""

from __future__ import annotations

import pytest
import torch
from helpers.families import tiny_model
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file

from trainspec.config import load
from trainspec.trainers.ckpt.hf_export import export_weights, hf_exporter
from trainspec.trainers.core.model import apply_lora
from trainspec.trainers.core.tokenizer import build_tokenizer

TARGETS = {"llama": ["q_proj", "down_proj"], "gpt2": ["c_attn", "c_fc"]}


def lora_settings(family: str) -> dict:
    return {
        "model.name": "builtin:tiny-qwen3",
        "model.lora": {"rank": 4, "alpha": 8.0, "target_modules": TARGETS[family]},
    }


def trained_adapters(model) -> None:
    """Non-zero B matrices (peft starts them at zero, which would make any merge look right)."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.1)


@pytest.mark.parametrize("family", sorted(TARGETS))
def test_export_is_peft_merge_and_the_adapter_loads_back(tmp_path, family):
    config = load("sft", [], lora_settings(family)).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    model = apply_lora(tiny_model(family), config.model.lora)
    trained_adapters(model)
    export = hf_exporter(model, tokenizer, config.model.lora)
    export_weights(model, tmp_path / "weights", export, is_main=True, adapter_dir=tmp_path / "a")
    ours = load_file(tmp_path / "weights" / "model.safetensors")

    peft_model = get_peft_model(
        tiny_model(family), LoraConfig(r=4, lora_alpha=8.0, target_modules=TARGETS[family])
    )
    adapters = {f"base_model.model.{name}": t for name, t in model.state_dict().items()}
    peft_model.load_state_dict(adapters)
    theirs = peft_model.merge_and_unload().state_dict()
    for name, tensor in ours.items():
        torch.testing.assert_close(tensor, theirs[name], msg=lambda m, name=name: f"{name}: {m}")
    untouched = tiny_model(family).state_dict()
    moved = {name for name in ours if not torch.equal(ours[name], untouched[name])}
    assert moved and all(any(t in name for t in TARGETS[family]) for name in moved)

    ids = torch.tensor([[5, 6, 7, 8]])
    adapted = PeftModel.from_pretrained(tiny_model(family), tmp_path / "a").eval()
    with torch.no_grad():
        want = peft_model(input_ids=ids).logits
        torch.testing.assert_close(adapted(input_ids=ids).logits, want)
    assert (tmp_path / "a" / "adapter_config.json").exists()


def test_without_an_adapter_dir_only_the_merged_weights_are_written(tmp_path):
    """The RL trainer's weight broadcasts: merged weights for the sampler, no adapter."""
    config = load("sft", [], lora_settings("llama")).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    model = apply_lora(tiny_model("llama"), config.model.lora)
    export = hf_exporter(model, tokenizer, config.model.lora)
    export_weights(model, tmp_path / "weights", export, is_main=True)
    names = load_file(tmp_path / "weights" / "model.safetensors")
    assert not any("lora" in name or "base_layer" in name for name in names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights"]


def test_exporting_leaves_the_live_model_as_it_was(tmp_path):
    """peft merges in place; the export must not add the adapters into the weights training
    goes on with (on the CPU the gathered state dict shares the model's tensors)."""
    config = load("sft", [], lora_settings("llama")).config
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    model = apply_lora(tiny_model("llama"), config.model.lora)
    trained_adapters(model)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    export = hf_exporter(model, tokenizer, config.model.lora)
    export_weights(model, tmp_path / "weights", export, is_main=True, adapter_dir=tmp_path / "a")
    after = model.state_dict()
    assert all(torch.equal(after[name], t) for name, t in before.items())
