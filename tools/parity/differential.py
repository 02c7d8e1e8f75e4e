"""RL and SFT on their shared fields: the same document resolves the same under both (apart from
the "auto" table), with the same warnings and errors.

Both trainer classes extend one base and run one tuple of shared rules, so a difference here
means a trainer schema redefined a shared key, a rule branches on the kind, or the auto table
leaked into a field it should not touch. Documents: every config in configs/, alone and composed
with each sibling, under each override case; and documents drawn from the base schema.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from .documents import generated_documents
from .subject import Subject

ROOT = Path(__file__).resolve().parents[2]
OVERRIDES: list[dict[str, Any]] = [
    {},
    {"model.moe_router_dtype": "bfloat16"},
    {"model.freeze_moe_router": True, "optim.weight_decay": 0.1},
    {"trace_path": "trace.json", "max_steps": 5},
    {"trace_path": "trace.json", "max_steps": 50},
    {"trace_path": "trace.json"},
    {"model.full_offload": True, "model.optim_cpu_offload": False},
    {"model.full_offload": True, "model.optim_cpu_offload": False, "optim.type": "muon"},
    {"model.full_offload": True},
    {"optim.type": "sgd"},
    {"optim.type": "muon", "model.fsdp_cpu_offload": True, "model.optim_cpu_offload": False},
    {"optim.type": "sign_sgd", "optim.max_norm": "None"},
    {"scheduler.type": "linear", "scheduler.warmup_steps": 5, "scheduler.decay_steps": 5},
    {"scheduler.type": "linear", "max_steps": 8, "scheduler.warmup_steps": 5},
    {"scheduler.type": "cosine", "max_steps": 100},
    {"scheduler.type": "cosine", "max_steps": "None"},
    {"model.ep_comm_backend": "deepep", "model.ep": 4, "model.impl": "custom"},
    {"model.ep_comm_backend": "deepep", "model.ep": 1},
    {"model.lora.rank": 8},
    {
        "model.lora.rank": 8,
        "model.vlm.vision_encoder_attr": "v",
        "model.impl": "custom",
        "model.vlm.language_model_attr": "l",
        "model.vlm.freeze_vision_encoder": False,
    },
    {"tokenizer.name": "org/tokenizer", "tokenizer.trust_remote_code": True},
    {"model.impl": "hf", "model.attn": "flash_attention_2", "model.trust_remote_code": True},
    {"env_vars.CUDA_VISIBLE_DEVICES": "0"},
    {"resume.step": 3, "resume.dir": "a/step_3"},
    {"control.checkpoint_signal": "SIGUSR1", "control.stop_signal": "SIGUSR1"},
]


def _auto_paths(subject: Subject) -> set[tuple[str, ...]]:
    from .facts import facts

    paths = set()
    for path, fact in facts(subject.schemas["rl"]).items():
        if "x-trainspec-auto" in fact:
            paths.add(tuple(part.partition("[")[0] for part in path.split(".")))
    return paths


def _shared(issues) -> list[tuple]:
    """The issues of the shared stages: structure (no rule) and the shared rules; a mode's own
    rules may read shared fields (SFT's data.seq_len against model.cp) and differ by design."""
    from trainspec.validators.pipeline import SHARED_RULES

    names = {rule.__name__ for rule in SHARED_RULES}
    return [(i.path, i.message, i.rule) for i in issues if i.rule is None or i.rule in names]


def _shared_outcome(kind: str, document: dict, base: set[str], auto: set[tuple[str, ...]]):
    """(shared errors, shared warnings, the resolved shared fields or None if rejected)."""
    from trainspec.config import ConfigError, validate

    shared = {k: v for k, v in document.items() if k in base}
    try:
        resolved = validate(kind, shared)
    except ConfigError as err:
        return _shared(err.errors), _shared(err.warnings), None
    dump = resolved.config.model_dump(mode="json", include=base)
    for *tables, key in auto:
        node = dump
        for table in tables:
            node = node.get(table) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(key, None)
    return [], _shared(resolved.warnings), dump


def _differ(rl: tuple, sft: tuple) -> bool:
    if rl[:2] != sft[:2]:
        return True
    return rl[2] is not None and sft[2] is not None and rl[2] != sft[2]


def _configs() -> list[dict]:
    from trainspec.config.merge import merge_all
    from trainspec.config.sources import schema_directive

    by_kind: dict[str, list[dict]] = {"rl": [], "sft": []}
    for path in sorted((ROOT / "configs").rglob("*.toml")):
        directive = schema_directive(path.read_bytes())
        target = directive[1] if directive else ""
        for kind, name in (("rl", "rl_trainer.json"), ("sft", "sft_trainer.json")):
            if target.endswith(name):  # the trainer configs; the others share no base
                by_kind[kind].append(tomllib.loads(path.read_text()))
    documents = []
    for siblings in by_kind.values():
        documents += siblings
        documents += [merge_all([a, b]) for a in siblings for b in siblings if a is not b]
    return documents


def check_differential(subject: Subject, drawn: int, tally) -> None:
    from trainspec.config.merge import merge_all, unflatten

    base_class = subject.classes["rl"].__mro__[1]
    base = set(base_class.model_fields)
    auto = _auto_paths(subject)
    cases = [
        merge_all([document, unflatten(override)])
        for document in _configs()
        for override in OVERRIDES
    ]
    cases += [
        {k: v for k, v in document.items() if k in base}
        for document in generated_documents(subject.schemas["rl"], drawn)
    ]
    for case in cases:
        rl = _shared_outcome("rl", case, base, auto)
        sft = _shared_outcome("sft", case, base, auto)
        tally.case(rl[2] is not None and sft[2] is not None)
        if _differ(rl, sft):
            tally.problems.append(
                f"RL and SFT differ on shared fields of {str(case)[:160]}: "
                f"{str(rl)[:200]} vs {str(sft)[:200]}"
            )
