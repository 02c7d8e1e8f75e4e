"""Configs written for the reference system validate unchanged and resolve to the same values,
apart from the documented changes (dist_timeout_seconds, the auto table, control)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from helpers.support import schema_accepts

from trainspec.config import load, validate
from trainspec.config.kinds import config_class

HERE = Path(__file__).parent / "reference"

# Defaults of the reference, from ../shared/reference/trainer-fields.md, that trainspec keeps.
REFERENCE_DEFAULTS = {
    "model.name": "Qwen/Qwen3-0.6B",
    "model.seq_len": 2048,
    "model.attn": "auto",
    "model.impl": "auto",
    "model.optim_cpu_offload": True,
    "model.fsdp_cpu_offload": False,
    "model.ep": "auto",
    "model.ep_comm_backend": "torch",
    "model.deepep_num_sms": 20,
    "model.cp_style": "ring",
    "model.optimization_dtype": "float32",
    "model.reduce_dtype": "float32",
    "model.fused_lm_head_token_chunk_size": 8192,
    "model.ac.freq": 1,
    "model.ac.targets": ["norm"],
    "model.ac_offloading.max_inflight_activations": 5,
    "model.compile.fullgraph": False,
    "model.lora": None,
    "optim.type": "adamw",
    "optim.lr": 1e-6,
    "optim.max_norm": 1.0,
    "optim.betas2": 0.999,
    "scheduler.type": "constant",
    "ckpt": None,
    "log.level": "info",
    "log.interval": 10.0,
    "log.ranks_filter": [0],
    "matmul_precision": "high",
    "max_steps": None,
    "gc.interval": 50,
    "heartbeat": None,
    "env_vars": {},
    "monitors.file.path": "metrics.jsonl",
    "monitors.wandb": None,
    "output_dir": "outputs",
}
RL_DEFAULTS = {
    "loss.type": "default",
    "loss.dppo_mask_low": 0.2,
    "loss.kl_tau": 0.001,
    "weight_broadcast.type": "filesystem",
    "rollout_transport.type": "zmq",
    "rollout_transport.port": 5555,
    "data.fake": None,
    "enable_router_replay": False,
    "metrics_server": None,
}
SFT_DEFAULTS = {
    "data.type": "sft",
    "data.name": "PrimeIntellect/Reverse-Text-SFT",
    "data.batch_size": 128,
    "data.loss_mask.assistant": True,
    "val": None,
    "weight_broadcast": None,
    "deployment.type": "single_node",
    "deployment.gpus_per_node": 8,
    "clean": False,
}
# The documented changes: (RL value, SFT value), where the reference had the same for both.
CHANGED = {
    "dist_timeout_seconds": (900, 900),  # reference: 3600
    "model.moe_router_dtype": ("float32", "bfloat16"),  # reference: float32
    "model.freeze_moe_router": (True, False),  # reference: false
    "optim.weight_decay": (0.0, 0.01),  # reference: 0.01
    # reference: null (start fresh); here the latest of the run's own checkpoints
    "resume": ({"step": None, "dir": None}, {"step": None, "dir": None}),
}


def get(config, dotted: str):
    value = config.model_dump(mode="json")
    for part in dotted.split("."):
        value = value[part]
    return value


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("rl", {**REFERENCE_DEFAULTS, **RL_DEFAULTS}),
        ("sft", {**REFERENCE_DEFAULTS, **SFT_DEFAULTS}),
    ],
)
def test_defaults_match_the_reference(kind, expected):
    config = validate(kind, {}).config
    mismatches = {p: get(config, p) for p, v in expected.items() if get(config, p) != v}
    assert mismatches == {}
    index = 0 if kind == "rl" else 1
    assert {p: get(config, p) for p in CHANGED} == {p: v[index] for p, v in CHANGED.items()}


def test_these_defaults_are_the_reference_inventorys():
    """The hand-written defaults above agree with the reference's inventory as committed data
    (reference/defaults.json, scripts/reference_defaults.py); each of CHANGED had one default
    there, for both trainers, and differs here."""
    inventory = json.loads((HERE / "defaults.json").read_text())["kinds"]

    def default(kind, path):  # a key whose variants disagree: its default variant's
        value = inventory[kind][path]
        variants = value.get("$variants") if isinstance(value, dict) else None
        return variants[inventory[kind][path.rsplit(".", 1)[0] + ".type"]] if variants else value

    for kind, own in (("rl", RL_DEFAULTS), ("sft", SFT_DEFAULTS)):
        expected = {**REFERENCE_DEFAULTS, **own}
        assert {p: default(kind, p) for p in expected} == expected
    for path, here in CHANGED.items():
        there = (default("rl", path), default("sft", path))
        assert there[0] == there[1] and there != here, path


def test_control_is_new_and_on_by_default(kind):
    control = validate(kind, {}).config.control
    assert control.checkpoint_signal == "SIGUSR1" and control.stop_signal == "SIGTERM"
    assert "control" in config_class(kind).model_fields


def test_reference_rl_trainer_table_validates_unchanged():
    path = HERE / "rl_trainer.toml"
    assert schema_accepts("rl", tomllib.loads(path.read_text()))
    config = load("rl", [path]).config
    assert config.model.compile is None
    assert config.model.full_offload is None
    assert config.model.fused_lm_head_token_chunk_size == "disabled"
    assert config.model.ac.freq == 2
    assert config.memory_profiler_path is None
    assert config.optim.type == "adamw" and config.optim.max_norm is None
    assert config.loss.type == "default" and config.loss.kl_tau == 0.01
    assert config.weight_broadcast.type == "filesystem"
    assert config.rollout_transport.type == "zmq" and config.rollout_transport.port == 6000
    assert config.ckpt.interval == 10 and config.ckpt.keep_last is None
    assert config.monitors.file is None
    assert config.monitors.wandb.entity is None and config.monitors.wandb.project == "reverse-text"


def test_reference_sft_file_validates_unchanged():
    path = HERE / "sft.toml"
    assert schema_accepts("sft", tomllib.loads(path.read_text()))
    config = load("sft", [path]).config
    assert config.model.ac is None and config.model.ac_offloading is None
    assert config.trace_path is None
    assert config.data.type == "sft" and config.data.loss_mask.user is True
    assert config.optim.type == "sgd" and config.optim.weight_decay == 0.01
    assert config.deployment.type == "single_node" and config.deployment.num_train_gpus == 2
    assert config.run.name == "reverse-sft" and config.run.dir == "reverse-sft"


def test_none_string_is_rejected_where_the_reference_rejects_null(kind):
    document = {"model": {"seq_len": "None"}}
    assert not schema_accepts(kind, document)
    with pytest.raises(Exception, match="model.seq_len"):
        validate(kind, document)


def test_missing_type_is_rejected_for_a_union_without_default_variant(kind):
    document = {"model": {"quantization": {"enable_grouped_gemm": False}}}
    assert not schema_accepts(kind, document)
    with pytest.raises(Exception, match="model.quantization"):
        validate(kind, document)
