"""The generated classes accept and reject exactly what the schema does, on a table of
well-typed and mistyped inputs (the generator's usual pitfalls: optional-by-default fields,
constrained nullables, discriminators on nullable unions, lax coercion)."""

from __future__ import annotations

import pytest
from helpers.support import schema_accepts
from pydantic import ValidationError

from trainspec.config import config_class

SHARED_CASES = [
    {"max_steps": 5},
    {"max_steps": "None"},
    {"max_steps": 0},
    {"max_steps": "5"},
    {"max_steps": True},
    {"max_steps": None},
    {"optim": {"max_norm": "None"}},
    {"optim": {"max_norm": -1.0}},
    {"optim": {"max_norm": 2}},
    {"optim": {"lr": "1e-5"}},
    {"optim": {"weight_decay": "auto"}},
    {"optim": {"weight_decay": "automatic"}},
    {"optim": {"type": "adam"}},
    {"optim": {"type": None}},
    {"optim": "None"},
    {"optim": None},
    {"model": {"freeze_moe_router": 1}},
    {"model": {"freeze_moe_router": "true"}},
    {"model": {"freeze_moe_router": "auto"}},
    {"model": {"ep": "auto"}},
    {"model": {"ep": 0}},
    {"model": {"ep": "4"}},
    {"model": {"fused_lm_head_token_chunk_size": "disabled"}},
    {"model": {"fused_lm_head_token_chunk_size": "off"}},
    {"model": {"quantization": {"type": "fp8"}}},
    {"model": {"quantization": "None"}},
    {"model": {"quantization": {"type": "int4"}}},
    {"model": {"quantization": {}}},
    {"model": {"full_offload": True, "optim_cpu_offload": False}},
    {"model": {"full_offload": "yes"}},
    {"model": {"full_offload": {"numa_bind": False}, "optim_cpu_offload": False}},
    {"model": {"lora": {"dropout": 1.5}}},
    {"model": {"lora": {"rank": 0}}},
    {"model": {"ac": {"targets": ["mlp", "everything"]}}},
    {"model": {"ac": {"targets": "mlp"}}},
    {"model": {"vlm": {"vision_encoder_attr": "a"}}},
    {"model": {"attn": "sdpa"}},
    {"model": {"debug": "None"}},
    {"model": "None"},
    {"tokenizer": {"trust_remote_code": "None"}},
    {"tokenizer": {"trust_remote_code": 0}},
    {"env_vars": {"A": 1}},
    {"env_vars": {"A": "1"}},
    {"log": {"interval": 0}},
    {"log": {"ranks_filter": [-1]}},
    {"log": {"ranks_filter": [0.5]}},
    {"control": {"checkpoint_signal": "SIGKILL"}},
    {"control": {"stop_signal": "None"}},
    {"scheduler": {"type": "cosine", "warmup_steps": -1}},
    {"dist_timeout_seconds": 0},
    {"matmul_precision": "low"},
    {"heartbeat": {}},
    {"gc": {"interval": 0}},
    {"ckpt": {}},
    {"ckpt": {"keep_last": 0}},
]
RL_CASES = [
    {"loss": {"type": "custom"}},
    {"loss": {"type": "custom", "import_path": "m.f", "kwargs": {"a": [1]}}},
    {"weight_broadcast": {"type": "nccl", "port": 70000}},
    {"weight_broadcast": "None"},
    {"rollout_transport": {"hwm": 0}},
    {"metrics_server": {"port": 0}},
    {"data": {"fake": {}}},
    {"data": {"fake": True}},
]
SFT_CASES = [
    {"weight_broadcast": "None"},
    {"weight_broadcast": {"port": 1}},
    {"weight_broadcast": {}},
    {"data": {"type": "fake", "length": "variable"}},
    {"data": {"probabilities": [0.5, -0.1]}},
    {"val": {}},
    {"val": {"data": {"type": "fake"}}},
    {"deployment": {"type": "multi_node", "nodes_per_fsdp_group": 0}},
    {"deployment": {"num_infer_gpus": -1}},
    {"run": {"name": "None"}},
    {"deployment": {"num_eval_gpus": 2}},  # renamed keys: both reject them
    {"deployment": {"type": "multi_node", "num_eval_nodes": 1}},
]


def classes_accept(kind: str, document: dict) -> bool:
    try:
        config_class(kind).model_validate(document)
    except ValidationError:
        return False
    return True


def agree(kind: str, document: dict) -> None:
    assert schema_accepts(kind, document) == classes_accept(kind, document), document


@pytest.mark.parametrize("document", SHARED_CASES, ids=str)
def test_shared_cases(kind, document):
    agree(kind, document)


@pytest.mark.parametrize("document", RL_CASES, ids=str)
def test_rl_cases(document):
    agree("rl", document)


@pytest.mark.parametrize("document", SFT_CASES, ids=str)
def test_sft_cases(document):
    agree("sft", document)


def test_the_table_has_both_outcomes():
    outcomes = {schema_accepts("rl", d) for d in SHARED_CASES}
    assert outcomes == {True, False}
