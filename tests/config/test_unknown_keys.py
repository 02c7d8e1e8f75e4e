"""Unknown keys are rejected at every depth, by the schema and by the generated classes alike."""

from __future__ import annotations

import pytest
from helpers.support import schema_accepts

from trainspec.config import ConfigError, validate

SHARED_CASES = [
    ({"bogus": 1}, "bogus"),
    ({"model": {"bogus": 1}}, "model.bogus"),
    ({"model": {"lora": {"bogus": 1}}}, "model.lora.bogus"),
    ({"model": {"ac": {"bogus": 1}}}, "model.ac.bogus"),
    ({"model": {"quantization": {"type": "mxfp8", "bogus": 1}}}, "model.quantization.bogus"),
    ({"optim": {"bogus": 1}}, "optim.bogus"),
    ({"optim": {"type": "sgd", "betas1": 0.9}}, "optim.betas1"),
    ({"optim": {"type": "muon", "bogus": 1}}, "optim.bogus"),
    ({"scheduler": {"type": "cosine", "decay_steps": 3}, "max_steps": 99}, "scheduler.decay_steps"),
    ({"scheduler": {"warmup_steps": 3}}, "scheduler.warmup_steps"),
    ({"ckpt": {"bogus": 1}}, "ckpt.bogus"),
    ({"control": {"bogus": 1}}, "control.bogus"),
    ({"log": {"bogus": 1}}, "log.bogus"),
    ({"gc": {"bogus": 1}}, "gc.bogus"),
    ({"tokenizer": {"bogus": 1}}, "tokenizer.bogus"),
    ({"monitors": {"file": {"bogus": 1}}}, "monitors.file.bogus"),
]

RL_CASES = [
    ({"loss": {"type": "ipo", "dppo_mask_low": 0.1}}, "loss.dppo_mask_low"),
    ({"loss": {"bogus": 1}}, "loss.bogus"),
    ({"data": {"fake": {"bogus": 1}}}, "data.fake.bogus"),
    ({"weight_broadcast": {"type": "nccl", "session_id": "x"}}, "weight_broadcast.session_id"),
    ({"rollout_transport": {"type": "filesystem", "port": 1}}, "rollout_transport.port"),
    ({"run": {}}, "run"),  # an SFT-only table
    ({"val": {"data": {}}}, "val"),
]

SFT_CASES = [
    ({"data": {"type": "fake", "name": "x"}}, "data.name"),
    ({"data": {"loss_mask": {"bogus": True}}}, "data.loss_mask.bogus"),
    ({"val": {"data": {"bogus": 1}}}, "val.data.bogus"),
    ({"deployment": {"type": "multi_node", "num_train_gpus": 8}}, "deployment.num_train_gpus"),
    ({"run": {"bogus": 1}}, "run.bogus"),
    ({"loss": {}}, "loss"),  # an RL-only table
    ({"rollout_transport": {}}, "rollout_transport"),
]


def _rejected(kind: str, document: dict, path: str) -> None:
    assert not schema_accepts(kind, document)
    with pytest.raises(ConfigError) as err:
        validate(kind, document)
    assert [e.path for e in err.value.errors] == [path]
    assert err.value.errors[0].message.startswith("is not a known key of ")
    assert err.value.errors[0].fix


@pytest.mark.parametrize("document, path", SHARED_CASES)
def test_unknown_shared_keys(kind, document, path):
    _rejected(kind, document, path)


@pytest.mark.parametrize("document, path", RL_CASES)
def test_unknown_rl_keys(document, path):
    _rejected("rl", document, path)


@pytest.mark.parametrize("document, path", SFT_CASES)
def test_unknown_sft_keys(document, path):
    _rejected("sft", document, path)
