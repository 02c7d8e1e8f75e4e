"""`sft` with its defaults (activation checkpointing on, the MoE router dtype "auto", "auto"
attention) trains a tiny random-initialised model of each real family from a local directory,
and the exported weights load back with transformers and generate."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from helpers.families import FAMILIES, save_tiny_model

from trainspec.config import load
from trainspec.trainers.builtin import MODELS
from trainspec.trainers.sft.train import train

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def model_dir(family: str, root: Path) -> Path:
    """The family's tiny model as a user's local checkpoint: config, weights and a tokenizer."""
    path = save_tiny_model(family, root / family)
    for name in TOKENIZER_FILES:
        shutil.copy(MODELS["tiny-qwen3"] / name, path / name)
    return path


def sft_config(source: Path, out: Path, **settings):
    base = {
        "model.name": str(source),
        "model.seq_len": 64,
        "model.compile": None,  # compiling each family is minutes on this CPU; not the point
        "data.type": "fake",
        "data.seq_len": 32,
        "data.batch_size": 2,
        "data.micro_batch_size": 2,
        "max_steps": 2,
        "ckpt.interval": 2,
        "run.name": "family",
        "output_dir": str(out),
    }
    return load("sft", [], {**base, **settings}).config


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sft_defaults_train_the_family_and_its_export_generates(tmp_path, family):
    from transformers import AutoModelForCausalLM

    config = sft_config(model_dir(family, tmp_path), tmp_path / "out")
    assert config.model.ac is not None  # activation checkpointing, as by default
    assert train(config) == 0
    weights = tmp_path / "out" / "family" / "checkpoints" / "latest" / "weights"
    exported = AutoModelForCausalLM.from_pretrained(weights)
    ids = torch.tensor([[5, 6, 7]])
    out = exported.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)
    assert out.shape == (1, 6)


LORA_TARGETS = {"gpt2": ["c_attn", "c_proj", "c_fc"]}  # GPT-2's Conv1D layers


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral", "gpt_oss", "llama", "gpt2"])
def test_a_lora_run_exports_merged_weights_and_an_adapter_that_agree(tmp_path, family):
    """The reference's default targets ("experts" included) on MoE families; the merge is
    peft's, so the merged weights and base + adapter give the same logits."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    source = model_dir(family, tmp_path)
    lora = {"rank": 4, "alpha": 16.0}
    if family in LORA_TARGETS:
        lora["target_modules"] = LORA_TARGETS[family]
    settings = {"model.lora": lora, "optim.lr": 0.05, "max_steps": 3, "ckpt.interval": 3}
    settings["model.moe_router_dtype"] = "float32"  # a bfloat16 router is stored rounded
    config = sft_config(source, tmp_path / "out", **settings)
    assert train(config) == 0
    step = tmp_path / "out" / "family" / "checkpoints" / "latest"
    merged = AutoModelForCausalLM.from_pretrained(step / "weights").eval()
    base = AutoModelForCausalLM.from_pretrained(source).eval()
    adapted = PeftModel.from_pretrained(base, step / "adapter").eval()
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        before = AutoModelForCausalLM.from_pretrained(source)(input_ids=ids).logits
        want = adapted(input_ids=ids).logits
        got = merged(input_ids=ids).logits
    assert not torch.allclose(want, before, atol=1e-3)  # the adapters learned something
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
