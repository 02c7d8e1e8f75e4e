"""The order in which rules run: model-level, then shared, then the mode's own."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainspec.kinds import KIND_INFO, Kind

from .auto import resolve_auto_defaults
from .context import RuleContext
from .model_rules import MODEL_RULES
from .shared import (
    dont_do_massive_traces,
    ep_only_with_custom_impl,
    full_optimizer_offload_requires_supported_optimizer,
    reject_protected_env_vars,
    resolve_no_grad_clipping_with_deepep,
    resolve_no_grad_clipping_with_full_offload,
    resolve_tokenizer_from_model,
    validate_control_signals,
    validate_env_var_names,
    validate_opt_and_fsdp_offload,
    validate_scheduler_steps,
    validate_step_xor_dir,
    vlm_freeze_incompatible_with_lora,
    vlms_require_bfloat16,
)

Rule = Callable[[Any, RuleContext], None]  # each rule takes the config class it is for

SHARED_RULES: tuple[Rule, ...] = (
    *MODEL_RULES,
    resolve_auto_defaults,
    reject_protected_env_vars,
    validate_env_var_names,
    validate_step_xor_dir,
    resolve_no_grad_clipping_with_deepep,
    full_optimizer_offload_requires_supported_optimizer,
    resolve_no_grad_clipping_with_full_offload,
    vlms_require_bfloat16,
    vlm_freeze_incompatible_with_lora,
    dont_do_massive_traces,
    validate_scheduler_steps,
    validate_opt_and_fsdp_offload,
    ep_only_with_custom_impl,
    resolve_tokenizer_from_model,
    validate_control_signals,
)


class _ModeRules(Mapping[str, tuple[Rule, ...]]):
    """kind → that mode's own rules (`<NAME>_RULES` of validators/<rules>.py), importing the
    module (and its classes) on first use."""

    def __getitem__(self, kind: str) -> tuple[Rule, ...]:
        name = KIND_INFO[kind].rules  # type: ignore[index]
        module = importlib.import_module(f"trainspec.validators.{name}")
        return getattr(module, f"{name.upper()}_RULES")

    def __iter__(self):
        return iter(KIND_INFO)

    def __len__(self) -> int:
        return len(KIND_INFO)


MODE_RULES: Mapping[str, tuple[Rule, ...]] = _ModeRules()


def rules_for(kind: Kind) -> Sequence[Rule]:
    """Every rule a `kind` config goes through, in order: the trainer kinds run the shared
    rules first, then their own; the other kinds have only their own."""
    own = MODE_RULES[kind]
    return (*SHARED_RULES, *own) if KIND_INFO[kind].shared_rules else own


def run_rules(config: object, kind: Kind) -> RuleContext:
    """Run every rule of `kind` on `config` (mutating it); return what they reported."""
    ctx = RuleContext(kind)
    for rule in rules_for(kind):
        ctx.rule = rule.__name__
        rule(config, ctx)
    return ctx
