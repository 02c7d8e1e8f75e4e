"""Rules stated twice: in the schema (`x-trainspec-rule`, so editors flag them) and by a
handwritten twin in src/trainspec/validators (which reports them with values and a fix).
A table of cases proves each pair agrees; the rules JSON Schema cannot state are listed with
the reason."""

from __future__ import annotations

from typing import Any

# Rules only code can check, and why.
CODE_ONLY = {
    "resolve_auto_defaults": "fills values (per-mode defaults); nothing to reject",
    "reject_protected_env_vars": "stated by the schema's propertyNames on env_vars, not a block",
    "deepep_disables_grad_clipping": "changes a value and warns; nothing to reject",
    "full_optimizer_offload_disables_grad_clipping": "changes a value and warns",
    "auto_setup_tokenizer": "fills values from the model table",
    "ac_offloading_requires_ac": "turns a table back on and warns",
    "validate_batch_size": "batch_size must be a multiple of another value (micro_batch_size)",
    "validate_subsets_and_splits": "compares the lengths of lists",
    "validate_gpu_count": "compares two values (num_train_gpus <= gpus_per_node)",
    "validate_cp_seq_len": "seq_len must be a multiple of another value (model.cp)",
    "auto_setup_deployment": "divides two values and sets model.dp_replicate",
    "auto_setup_run_identity": "derives the run name",
}
# Rules the schema states only in part.
PARTLY_CODE = {
    "validate_scheduler_steps": "warmup_steps + decay_steps <= max_steps and "
    "warmup_steps < max_steps compare values with each other",
    "validate_selective_targets": "removing duplicate targets changes a value",
}

VLM = {"vision_encoder_attr": "v", "language_model_attr": "l"}
VLM_OK = {
    "impl": "custom",
    "vlm": VLM,
    "optimization_dtype": "bfloat16",
    "reduce_dtype": "bfloat16",
}

# (kind, rule, document, whether the rule rejects it)
CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("rl", "dont_do_massive_traces", {"trace_path": "t.json"}, True),
    ("rl", "dont_do_massive_traces", {"trace_path": "t.json", "max_steps": 10}, True),
    ("sft", "dont_do_massive_traces", {"trace_path": "t.json", "max_steps": 9}, False),
    ("rl", "dont_do_massive_traces", {"trace_path": "None", "max_steps": 50}, False),
    ("rl", "validate_scheduler_steps", {"scheduler": {"type": "cosine"}}, True),
    ("sft", "validate_scheduler_steps", {"scheduler": {"type": "cosine"}, "max_steps": 50}, False),
    ("rl", "validate_scheduler_steps", {"scheduler": {"type": "linear"}}, True),
    (
        "rl",
        "validate_scheduler_steps",
        {"scheduler": {"type": "linear", "decay_steps": 0, "warmup_steps": 3}},
        False,
    ),
    (
        "sft",
        "validate_scheduler_steps",
        {"scheduler": {"type": "linear", "decay_steps": 0, "warmup_steps": 0}},
        True,
    ),
    (
        "rl",
        "full_optimizer_offload_requires_supported_optimizer",
        {"model": {"full_offload": True, "optim_cpu_offload": False}, "optim": {"type": "sgd"}},
        True,
    ),
    (
        "sft",
        "full_optimizer_offload_requires_supported_optimizer",
        {"model": {"full_offload": {}, "optim_cpu_offload": False}, "optim": {"lr": 1e-5}},
        False,
    ),
    (
        "rl",
        "full_optimizer_offload_requires_supported_optimizer",
        {"model": {"full_offload": False}, "optim": {"type": "muon"}},
        False,
    ),
    (
        "rl",
        "validate_opt_and_fsdp_offload",
        {
            "optim": {"type": "muon"},
            "model": {"fsdp_cpu_offload": True, "optim_cpu_offload": False},
        },
        True,
    ),
    ("sft", "validate_opt_and_fsdp_offload", {"optim": {"type": "muon"}}, False),
    (
        "rl",
        "validate_selective_targets",
        {"model": {"ac": {"mode": "selective", "targets": []}}},
        True,
    ),
    ("rl", "validate_selective_targets", {"model": {"ac": {"mode": "full", "targets": []}}}, False),
    (
        "sft",
        "trust_remote_code_only_with_hf",
        {"model": {"trust_remote_code": True, "impl": "custom"}},
        True,
    ),
    ("sft", "trust_remote_code_only_with_hf", {"model": {"trust_remote_code": True}}, False),
    ("rl", "vlm_only_with_custom_impl", {"model": {**VLM_OK, "impl": "auto"}}, True),
    ("rl", "vlm_only_with_custom_impl", {"model": VLM_OK}, False),
    ("rl", "vlm_cp_requires_ulysses", {"model": {**VLM_OK, "cp": 2}}, True),
    (
        "sft",
        "vlm_cp_requires_ulysses",
        {"model": {**VLM_OK, "cp": 2, "cp_style": "ulysses"}},
        False,
    ),
    ("rl", "validate_cp", {"model": {"cp": 2, "impl": "hf", "attn": "flash_attention_2"}}, True),
    ("rl", "validate_cp", {"model": {"cp": 2}}, False),
    (
        "sft",
        "selective_ac_only_with_custom_impl",
        {"model": {"ac": {"mode": "selective"}, "impl": "hf", "attn": "flash_attention_2"}},
        True,
    ),
    ("sft", "selective_ac_only_with_custom_impl", {"model": {"ac": {"mode": "selective"}}}, False),
    ("rl", "cpu_offload_mutual_exclusion", {"model": {"fsdp_cpu_offload": True}}, True),
    ("rl", "cpu_offload_mutual_exclusion", {"model": {"full_offload": True}}, True),
    (
        "rl",
        "cpu_offload_mutual_exclusion",
        {"model": {"fsdp_cpu_offload": True, "optim_cpu_offload": False, "full_offload": {}}},
        True,
    ),
    (
        "sft",
        "cpu_offload_mutual_exclusion",
        {"model": {"fsdp_cpu_offload": True, "optim_cpu_offload": False}},
        False,
    ),
    ("rl", "flash_attention_4_only_with_custom_impl", {"model": {"impl": "hf"}}, True),
    (
        "rl",
        "flash_attention_4_only_with_custom_impl",
        {"model": {"impl": "hf", "attn": "flash_attention_4"}},
        True,
    ),
    (
        "sft",
        "flash_attention_4_only_with_custom_impl",
        {"model": {"impl": "hf", "attn": "flash_attention_3"}},
        False,
    ),
    (
        "rl",
        "quantization_only_with_custom_impl",
        {"model": {"quantization": {"type": "fp8"}, "impl": "hf", "attn": "flash_attention_2"}},
        True,
    ),
    (
        "rl",
        "quantization_only_with_custom_impl",
        {"model": {"quantization": {"type": "fp8"}}},
        False,
    ),
    ("sft", "validate_ep_comm_backend", {"model": {"ep_comm_backend": "deepep", "ep": 1}}, True),
    ("sft", "validate_ep_comm_backend", {"model": {"ep_comm_backend": "deepep"}}, False),
    (
        "rl",
        "mxfp8_only_with_torch_ep_backend",
        {"model": {"quantization": {"type": "mxfp8"}, "ep_comm_backend": "deepep", "ep": 4}},
        True,
    ),
    (
        "rl",
        "mxfp8_only_with_torch_ep_backend",
        {"model": {"quantization": {"type": "mxfp8"}}},
        False,
    ),
    ("sft", "vlms_require_bfloat16", {"model": {"impl": "custom", "vlm": VLM}}, True),
    ("sft", "vlms_require_bfloat16", {"model": VLM_OK}, False),
    (
        "rl",
        "vlm_freeze_incompatible_with_lora",
        {"model": {**VLM_OK, "vlm": {**VLM, "freeze_vision_encoder": False}, "lora": {}}},
        True,
    ),
    ("rl", "vlm_freeze_incompatible_with_lora", {"model": {**VLM_OK, "lora": {}}}, False),
    (
        "sft",
        "ep_only_with_custom_impl",
        {"model": {"impl": "hf", "attn": "flash_attention_2", "ep": 2}},
        True,
    ),
    (
        "sft",
        "ep_only_with_custom_impl",
        {"model": {"impl": "hf", "attn": "flash_attention_2", "ep": 1}},
        False,
    ),
    ("rl", "validate_step_xor_dir", {"resume": {"step": 4, "dir": "a/step_4"}}, True),
    ("rl", "validate_step_xor_dir", {"resume": {"dir": "a/checkpoints/latest"}}, True),
    ("sft", "validate_step_xor_dir", {"resume": {"dir": "a/checkpoints/step_40"}}, False),
    ("sft", "validate_step_xor_dir", {"resume": {"step": 4, "dir": "None"}}, False),
    ("rl", "validate_control_signals", {"control": {"stop_signal": "SIGUSR1"}}, True),
    (
        "sft",
        "validate_control_signals",
        {"control": {"stop_signal": "SIGUSR2", "checkpoint_signal": "SIGUSR2"}},
        True,
    ),
    (
        "rl",
        "validate_control_signals",
        {"control": {"stop_signal": "SIGUSR1", "checkpoint_signal": "SIGUSR2"}},
        False,
    ),
    (
        "rl",
        "validate_lora_broadcast",
        {"model": {"lora": {}}, "weight_broadcast": {"type": "nccl"}},
        True,
    ),
    ("rl", "validate_lora_broadcast", {"model": {"lora": {}}}, False),
    (
        "rl",
        "router_replay_only_with_custom_impl",
        {"enable_router_replay": True, "model": {"impl": "hf", "attn": "flash_attention_2"}},
        True,
    ),
    ("rl", "router_replay_only_with_custom_impl", {"enable_router_replay": True}, False),
    (
        "sft",
        "validate_cp_micro_batch_size",
        {"model": {"cp": 2}, "data": {"micro_batch_size": 2}},
        True,
    ),
    (
        "sft",
        "validate_cp_micro_batch_size",
        {"model": {"cp": 2}, "val": {"data": {"micro_batch_size": 4, "batch_size": 8}}},
        True,
    ),
    ("sft", "validate_cp_micro_batch_size", {"model": {"cp": 2}}, False),
    ("sft", "validate_vlm_constraints", {"model": VLM_OK, "data": {"micro_batch_size": 2}}, True),
    ("sft", "validate_vlm_constraints", {"model": VLM_OK}, False),
]


def stated_rules(schema: Any, found: set[str] | None = None) -> set[str]:
    """Names of the rules a (bundled) schema states."""
    found = set() if found is None else found
    if isinstance(schema, dict):
        if "x-trainspec-rule" in schema:
            found.add(schema["x-trainspec-rule"])
        for value in schema.values():
            stated_rules(value, found)
    elif isinstance(schema, list):
        for value in schema:
            stated_rules(value, found)
    return found


def schema_verdict(kind: str, document: dict) -> set[str]:
    """The stated rules the schema finds broken in `document`."""
    from trainspec.config.bundle import bundled_schema
    from trainspec.config.schema_check import _validator, rule_of

    schema = bundled_schema(kind)
    broken: set[str] = set()
    pending = list(_validator(kind).iter_errors(document))
    while pending:
        error = pending.pop()
        name = rule_of(schema, error.schema_path)
        if name:
            broken.add(name)
        for branch in getattr(error.kind, "context", None) or []:
            pending.extend(branch)
    return broken


def code_verdict(kind: str, document: dict) -> set[str]:
    """The handwritten rules that reject `document`."""
    from trainspec.config import ConfigError, validate

    try:
        validate(kind, document)
    except ConfigError as err:
        return {issue.rule for issue in err.errors if issue.rule}
    return set()


def disagreements() -> list[str]:
    out = []
    for kind, rule, document, rejects in CASES:
        by_schema = rule in schema_verdict(kind, document)
        by_code = rule in code_verdict(kind, document)
        if by_schema != rejects or by_code != rejects:
            out.append(
                f"[{kind}] {rule} on {document}: expected {'reject' if rejects else 'accept'}, "
                f"schema {'rejects' if by_schema else 'accepts'}, "
                f"code {'rejects' if by_code else 'accepts'}"
            )
    return out
