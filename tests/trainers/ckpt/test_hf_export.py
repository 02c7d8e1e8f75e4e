"""The Hugging Face weights trainspec writes: a tied weight once under its first name (as
`save_pretrained` does) in a checkpoint, under every name in a broadcast (`untie`), which vLLM's
in-place reload needs (tests/trainers/serving/test_vllm_engine.py); with LoRA too."""

from __future__ import annotations

import pytest
import torch
from helpers.families import tiny_model
from safetensors.torch import load_file

from trainspec.config import load
from trainspec.trainers.ckpt.hf_export import export_weights, hf_exporter
from trainspec.trainers.core.model import apply_lora
from trainspec.trainers.core.tokenizer import build_tokenizer


def tied_model():
    model = tiny_model("llama")
    model.config.tie_word_embeddings = True
    model.tie_weights()
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied: the check can fail
    return model


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_a_tied_weight_is_written_once_or_with_untie_under_every_name(tmp_path, lora):
    config = load("sft", [], {"model.name": "builtin:tiny-qwen3"}).config
    model = tied_model()
    lora_cfg = None
    if lora:
        lora = {"rank": 2, "alpha": 4.0, "target_modules": ["q_proj"]}
        settings = {"model.name": "builtin:tiny-qwen3", "model.lora": lora}
        lora_cfg = load("sft", [], settings).config.model.lora
        model = apply_lora(model, lora_cfg)
    export = hf_exporter(model, build_tokenizer(config.tokenizer, config.model), lora_cfg)
    for untie in (False, True):
        target = tmp_path / f"untie-{untie}"
        export_weights(model, target, export, is_main=True, untie=untie)
        weights = load_file(target / "model.safetensors")
        assert ("lm_head.weight" in weights) == untie
        if untie:
            assert torch.equal(weights["lm_head.weight"], weights["model.embed_tokens.weight"])
