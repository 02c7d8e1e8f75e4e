"""Shared fields behave identically under RL and SFT, apart from the three "auto" settings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trainspec.config import ConfigError, validate
from trainspec.config.merge import merge_all
from trainspec.generated.base_trainer import BaseTrainerConfig

SHARED = list(BaseTrainerConfig.model_fields)
AUTO = {
    "rl": {"moe_router_dtype": "float32", "freeze_moe_router": True, "weight_decay": 0.0},
    "sft": {"moe_router_dtype": "bfloat16", "freeze_moe_router": False, "weight_decay": 0.01},
}
VLM = {"vision_encoder_attr": "model.visual", "language_model_attr": "model.language_model"}

# Fragments of shared-field input: valid ones, ones each shared rule rejects or rewrites, and
# type errors. None of them touches a field that only one mode has.
FRAGMENTS = [
    {},
    {"optim": {"lr": 1e-5, "betas1": 0.8}},
    {"optim": {"type": "sgd", "momentum": 0.5}},
    {"optim": {"type": "muon"}},
    {"optim": {"type": "sign_sgd", "max_norm": "None"}},
    {"optim": {"weight_decay": 0.05}},
    {"scheduler": {"type": "linear", "warmup_steps": 5, "decay_steps": 5}},
    {"scheduler": {"type": "linear", "warmup_steps": 0, "decay_steps": 0}},
    {"scheduler": {"type": "cosine", "warmup_steps": 3}},
    {"max_steps": 8},
    {"max_steps": 100},
    {"trace_path": "trace.json"},
    {"model": {"ep_comm_backend": "deepep", "ep": 4, "impl": "custom"}},
    {"model": {"ep_comm_backend": "deepep", "ep": 1}},
    {"model": {"full_offload": True, "optim_cpu_offload": False}},
    {"model": {"full_offload": True}},
    {"model": {"fsdp_cpu_offload": True, "optim_cpu_offload": False}},
    {"model": {"impl": "hf"}},
    {"model": {"impl": "hf", "attn": "flash_attention_2", "ep": 2}},
    {"model": {"impl": "hf", "attn": "flash_attention_3", "trust_remote_code": True}},
    {"model": {"vlm": VLM, "impl": "custom"}},
    {"model": {"optimization_dtype": "bfloat16", "reduce_dtype": "bfloat16"}},
    {"model": {"vlm": {**VLM, "freeze_vision_encoder": False}, "lora": {"rank": 8}}},
    {"model": {"lora": {}}},
    {"model": {"ac": "None"}},
    {"model": {"ac": "None", "ac_offloading": "None"}},
    {"model": {"ac": {"mode": "selective", "targets": ["mlp", "mlp"]}}},
    {"model": {"moe_router_dtype": "bfloat16", "freeze_moe_router": True}},
    {"model": {"quantization": {"type": "mxfp8"}, "ep_comm_backend": "deepep", "ep": 2}},
    {"model": {"cp": 2, "impl": "hf", "attn": "flash_attention_2"}},
    {"model": {"seq_len": "long"}},
    {"model": {"name": "org/other-model", "trust_remote_code": True}},
    {"tokenizer": {"name": "org/tokenizer"}},
    {"env_vars": {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO"}},
    {"control": {"checkpoint_signal": "SIGUSR2", "stop_signal": "SIGUSR2"}},
    {"control": "None", "gc": "None", "ckpt": {"interval": 5}},
    {"heartbeat": {"url": "http://localhost:9/ping"}},
    {"log": {"level": "debug", "ranks_filter": [0, 1]}},
    {"matmul_precision": "medium", "dist_timeout_seconds": 60},
]


def outcome(kind: str, document: dict):
    """What a mode makes of a document, with the auto settings checked and taken out."""
    try:
        resolved = validate(kind, document)
    except ConfigError as err:
        return (
            "invalid",
            [(e.path, e.message, e.fix, e.rule) for e in err.errors],
            [(w.path, w.message, w.fix, w.rule) for w in err.warnings],
        )
    shared = resolved.config.model_dump(mode="json", include=set(SHARED))
    auto = {
        "moe_router_dtype": shared["model"].pop("moe_router_dtype"),
        "freeze_moe_router": shared["model"].pop("freeze_moe_router"),
        "weight_decay": shared["optim"].pop("weight_decay"),
    }
    explicit = {**document.get("model", {}), **document.get("optim", {})}
    for name, value in auto.items():
        assert value == explicit.get(name, AUTO[kind][name])
    return ("valid", shared, [(w.path, w.message, w.fix, w.rule) for w in resolved.warnings])


def test_every_fragment_alone_agrees():
    seen = set()
    for fragment in FRAGMENTS:
        rl, sft = outcome("rl", fragment), outcome("sft", fragment)
        assert rl == sft, fragment
        seen.add(rl[0])
    assert seen == {"valid", "invalid"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=2, max_size=4))
def test_combined_fragments_agree(fragments):
    document = merge_all(fragments)
    assert outcome("rl", document) == outcome("sft", document)
