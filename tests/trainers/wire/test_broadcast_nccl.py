"""The NCCL broadcast's parts that run without a GPU (wire/broadcast_nccl.py): the weights it
names and iterates, checked by vLLM's own sender check against what it declares, and the relay
files through which the orchestrator drives the server. The transfer itself needs two GPUs
(tests/gpu/test_nccl_broadcast.py, scripts/gpu_check.sh)."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch
from safetensors.torch import load_file

from trainspec.config import load
from trainspec.trainers.ckpt.hf_export import export_weights
from trainspec.trainers.core.model import load_hf_model
from trainspec.trainers.wire.broadcast import broadcast_dir
from trainspec.trainers.wire.broadcast_nccl import (
    MARKER,
    RunDirRelay,
    hf_named_parameters,
    init_file,
    nccl_steps,
    weight_source,
)

pytest.importorskip("vllm", reason="vLLM is not installed (make install installs it)")


@pytest.fixture(scope="module")
def model():
    config = load("rl", [], {"model.name": "builtin:tiny-qwen3"}).config
    return load_hf_model(config.model, seed=0)


class Wrapper(torch.nn.Module):
    """The training module: the Hugging Face model inside the loss wrapper (`lm.`)."""

    def __init__(self, lm) -> None:
        super().__init__()
        self.lm = lm


def test_the_names_and_weights_sent_are_the_filesystem_broadcasts(model, tmp_path):
    """The same names and tensors as the files the filesystem broadcast writes: the tied
    output layer under its own name too, the wrapper's prefix dropped."""
    export_weights(model, tmp_path, None, is_main=True, untie=True)
    written = load_file(str(tmp_path / "model.safetensors"))
    sent = dict(hf_named_parameters(Wrapper(model)))
    assert sent.keys() == written.keys() and "lm_head.weight" in sent
    for name, tensor in written.items():
        assert torch.equal(sent[name].detach(), tensor), name


def test_vllms_sender_check_accepts_what_the_source_declares_and_yields(model):
    """vLLM's engine sizes the workers' buffers from metadata() and sends what iteration
    yields; its own check (`_checked_iter`) raises when the two disagree."""
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerWeightTransferEngine

    source = weight_source(Wrapper(model), torch.device("cpu"))
    meta = source.metadata()
    sent = list(NCCLTrainerWeightTransferEngine._checked_iter(source, meta))
    assert [name for name, _ in sent] == [m.name for m in meta]
    assert len(meta) == len(hf_named_parameters(model))


def test_the_relay_writes_what_the_orchestrator_posts_and_forgets_an_earlier_run(tmp_path):
    from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferUpdateInfo

    relay = RunDirRelay(tmp_path)
    relay.init_weight_transfer_engine({"master_address": "localhost", "world_size": 2})
    update = asdict(NCCLWeightTransferUpdateInfo(["a"], ["bfloat16"], [[2, 3]]))
    for step in (3, 1, 2):
        relay.step = step
        relay.start_weight_update()
        relay.update_weights(update)
        relay.finish_weight_update()
    assert json.loads(init_file(tmp_path).read_text())["init_info"]["world_size"] == 2
    assert nccl_steps(tmp_path) == [1, 2, 3]
    marker = json.loads((broadcast_dir(tmp_path, 2) / MARKER).read_text())
    assert marker == {"update_info": {"names": ["a"], "dtype_names": ["bfloat16"],
                                      "shapes": [[2, 3]]}}  # fmt: skip
    relay.forget_last_run()
    assert not init_file(tmp_path).exists() and nccl_steps(tmp_path) == []
