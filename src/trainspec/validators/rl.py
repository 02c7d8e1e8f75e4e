"""Rules of the RL trainer only; they run after the shared rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import RuleContext, show

if TYPE_CHECKING:
    from trainspec.generated.rl_trainer import RLTrainerConfig

IN_MEMORY_BROADCASTS = ("nccl", "nixl")


def validate_lora_broadcast(cfg: RLTrainerConfig, ctx: RuleContext) -> None:
    """[model.lora] needs weight_broadcast.type "filesystem" ("nccl" and "nixl" cannot send it)."""
    if cfg.model.lora is not None and cfg.weight_broadcast.type in IN_MEMORY_BROADCASTS:
        ctx.error(
            "weight_broadcast.type",
            f"= {show(cfg.weight_broadcast.type)} cannot send LoRA adapters ([model.lora])",
            'set weight_broadcast.type = "filesystem", or remove [model.lora]',
            related=("model.lora",),
        )


def router_replay_only_with_custom_impl(cfg: RLTrainerConfig, ctx: RuleContext) -> None:
    """enable_router_replay = true needs model.impl "custom" or "auto"."""
    if cfg.enable_router_replay and cfg.model.impl == "hf":
        ctx.error(
            "enable_router_replay",
            '= true needs model.impl "custom" or "auto", got "hf"',
            'set model.impl = "custom", or set enable_router_replay = false',
        )


RL_RULES = (
    validate_lora_broadcast,
    router_replay_only_with_custom_impl,
)
