"""RL_RULES: one test per outcome of every rule of the RL trainer."""

from __future__ import annotations

import pytest

from trainspec.validators.rl import RL_RULES

HF = {"impl": "hf", "attn": "flash_attention_2"}


def test_rl_rules_are_the_documented_ones():
    assert [rule.__name__ for rule in RL_RULES] == [
        "validate_lora_broadcast",
        "router_replay_only_with_custom_impl",
    ]


# --- validate_lora_broadcast ---------------------------------------------------------------------


@pytest.mark.parametrize("broadcast", ["nccl", "nixl"])
def test_validate_lora_broadcast_rejects_in_memory_broadcast(broadcast, outcome):
    doc = {"model": {"lora": {}}, "weight_broadcast": {"type": broadcast}}
    issue = outcome("rl", doc).only_error("validate_lora_broadcast", "weight_broadcast.type")
    assert f'= "{broadcast}"' in issue.message
    assert "[model.lora]" in issue.message


@pytest.mark.parametrize(
    ("lora", "broadcast"),
    [({}, "filesystem"), ({"rank": 8}, None), ("None", "nccl"), ("None", "nixl")],
)
def test_validate_lora_broadcast_leaves_valid_pairs_alone(lora, broadcast, outcome):
    doc = {"model": {"lora": lora}}
    if broadcast is not None:
        doc["weight_broadcast"] = {"type": broadcast}
    config = outcome("rl", doc).clean()
    assert config.weight_broadcast.type == (broadcast or "filesystem")
    assert (config.model.lora is not None) is (lora != "None")


def test_validate_lora_broadcast_is_rl_only(outcome):
    """SFT has a weight_broadcast table too, but LoRA over NCCL is the RL trainer's problem."""
    doc = {"model": {"lora": {}}, "weight_broadcast": {"type": "nccl"}}
    config = outcome("sft", doc).clean()
    assert config.weight_broadcast.type == "nccl"


# --- router_replay_only_with_custom_impl ---------------------------------------------------------


def test_router_replay_only_with_custom_impl_rejects_hf(outcome):
    doc = {"model": HF, "enable_router_replay": True}
    issue = outcome("rl", doc).only_error(
        "router_replay_only_with_custom_impl", "enable_router_replay"
    )
    assert "= true" in issue.message
    assert 'got "hf"' in issue.message


@pytest.mark.parametrize(
    ("model", "replay"),
    [({"impl": "custom"}, True), ({"impl": "auto"}, True), ({}, True), (HF, False)],
    ids=["custom", "auto", "default-impl", "hf-off"],
)
def test_router_replay_only_with_custom_impl_leaves_valid_pairs_alone(model, replay, outcome):
    config = outcome("rl", {"model": model, "enable_router_replay": replay}).clean()
    assert config.enable_router_replay is replay
