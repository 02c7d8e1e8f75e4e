"""The order in which rules run: model-level, then shared, then the mode's own."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

from .auto import resolve_auto_defaults
from .context import Kind, RuleContext
from .model_rules import MODEL_RULES
from .shared import (
    auto_setup_tokenizer,
    deepep_disables_grad_clipping,
    dont_do_massive_traces,
    ep_only_with_custom_impl,
    full_optimizer_offload_disables_grad_clipping,
    full_optimizer_offload_requires_supported_optimizer,
    reject_protected_env_vars,
    validate_control_signals,
    validate_opt_and_fsdp_offload,
    validate_scheduler_steps,
    validate_step_xor_dir,
    vlm_freeze_incompatible_with_lora,
    vlms_require_bfloat16,
)

Rule = Callable[[object, RuleContext], None]

SHARED_RULES: tuple[Rule, ...] = (
    *MODEL_RULES,
    resolve_auto_defaults,
    reject_protected_env_vars,
    validate_step_xor_dir,
    deepep_disables_grad_clipping,
    full_optimizer_offload_requires_supported_optimizer,
    full_optimizer_offload_disables_grad_clipping,
    vlms_require_bfloat16,
    vlm_freeze_incompatible_with_lora,
    dont_do_massive_traces,
    validate_scheduler_steps,
    validate_opt_and_fsdp_offload,
    ep_only_with_custom_impl,
    auto_setup_tokenizer,
    validate_control_signals,
)


class _ModeRules(Mapping[str, tuple[Rule, ...]]):
    """kind → that mode's rules, importing the mode's module (and its classes) on first use."""

    modules = {
        "rl": ("trainspec.validators.rl", "RL_RULES"),
        "sft": ("trainspec.validators.sft", "SFT_RULES"),
        "orchestrator": ("trainspec.validators.orchestrator", "ORCHESTRATOR_RULES"),
        "rl_run": ("trainspec.validators.rl_run", "RL_RUN_RULES"),
    }

    def __getitem__(self, kind: str) -> tuple[Rule, ...]:
        module, name = self.modules[kind]
        return getattr(importlib.import_module(module), name)

    def __iter__(self):
        return iter(self.modules)

    def __len__(self) -> int:
        return len(self.modules)


MODE_RULES: Mapping[str, tuple[Rule, ...]] = _ModeRules()


def rules_for(kind: Kind) -> Sequence[Rule]:
    """A trainer's shared rules then its own; the other kinds have only their own."""
    if kind in ("orchestrator", "rl_run"):
        return MODE_RULES[kind]
    return (*SHARED_RULES, *MODE_RULES[kind])


def run_rules(config: object, kind: Kind) -> RuleContext:
    """Run every rule of `kind` on `config` (mutating it); return what they reported."""
    ctx = RuleContext(kind)
    for rule in rules_for(kind):
        ctx.rule = rule.__name__
        rule(config, ctx)
    return ctx
