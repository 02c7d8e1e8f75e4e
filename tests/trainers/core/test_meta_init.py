"""Ranks other than 0 build the model on the meta device: the shapes only, no weights read and
no memory taken, to be filled with rank 0's shards once sharded (parallel.fill_from_rank0,
proven end to end by the torchrun tests in sft/test_meta_init_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.families import save_tiny_model

from trainspec.config import load
from trainspec.trainers.core.model import build_model
from trainspec.trainers.core.parallel import shards
from trainspec.trainers.core.world import World
from trainspec.trainers.errors import SetupError


def model_cfg(source: Path, **settings):
    return load("sft", [], {"model.name": str(source), **settings}).config.model


@pytest.mark.parametrize("family", ["llama", "gpt2", "qwen3_moe"])
def test_a_meta_rank_reads_no_weights_and_allocates_nothing(tmp_path, family):
    source = save_tiny_model(family, tmp_path / family)
    for weights in source.glob("*.safetensors"):
        weights.unlink()  # a rank that tried to read them would fail here
    model = build_model(model_cfg(source), seed=0, on_meta=True)
    tensors = [*model.parameters(), *model.buffers()]
    assert tensors and {t.device.type for t in tensors} == {"meta"}
    with pytest.raises((SetupError, OSError)):
        build_model(model_cfg(source), seed=0)  # rank 0 does read them


def test_a_meta_rank_has_rank_0s_names_and_shapes_lora_included(tmp_path):
    source = save_tiny_model("llama", tmp_path / "llama")
    cfg = model_cfg(source, **{"model.lora": {"rank": 4}})
    real = build_model(cfg, seed=0)
    meta = build_model(cfg, seed=0, on_meta=True)

    def shapes(model):
        named = [*model.named_parameters(), *model.named_buffers()]
        return {name: (tuple(t.shape), t.dtype, t.requires_grad) for name, t in named}

    assert shapes(meta) == shapes(real)
    assert any("lora_A" in name for name in shapes(meta))


@pytest.mark.parametrize(
    "processes, device, sharded",
    [(1, "cpu", False), (2, "cpu", True), (1, "cuda", True), (4, "cuda", True)],
)
def test_one_gpu_is_sharded_as_several_are(processes, device, sharded):
    """On a GPU FSDP wraps the model with one process too, so bf16 mixed precision comes from
    the same policy; one CPU process runs the model as it is."""
    assert shards(World(0, processes, 0, torch.device(device))) is sharded


def test_lora_adapters_start_from_the_seed_on_a_model_with_weights(tmp_path):
    """Rank 0 and a relaunch draw the same adapters: they used to come from whatever the
    global RNG held, so one and two processes trained different LoRA runs."""
    cfg = model_cfg(save_tiny_model("llama", tmp_path / "llama"), **{"model.lora": {"rank": 4}})

    def adapters(seed):
        model = build_model(cfg, seed=seed)
        return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_A" in n}

    first, again, other = adapters(0), adapters(0), adapters(1)
    assert first and all(torch.equal(first[n], again[n]) for n in first)
    assert not all(torch.equal(first[n], other[n]) for n in first)
