"""Rules of the orchestrator config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import RuleContext, show

if TYPE_CHECKING:
    from trainspec.generated.orchestrator import OrchestratorConfig


def batch_holds_whole_groups(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """batch_size must be a multiple of rollouts_per_example, so a step holds whole groups.

    Advantages compare the completions of one prompt."""
    if cfg.batch_size % cfg.rollouts_per_example:
        below = cfg.batch_size - cfg.batch_size % cfg.rollouts_per_example
        ctx.error(
            "batch_size",
            f"= {show(cfg.batch_size)} is not a multiple of rollouts_per_example "
            f"= {show(cfg.rollouts_per_example)}",
            f"set batch_size = {max(below, cfg.rollouts_per_example)} or "
            f"{below + cfg.rollouts_per_example}",
            related=("rollouts_per_example",),
        )


def single_rollouts_learn_nothing(cfg: OrchestratorConfig, ctx: RuleContext) -> None:
    """rollouts_per_example = 1 gets a warning: every advantage is 0, so nothing is learned."""
    if cfg.rollouts_per_example == 1:
        ctx.warn(
            "rollouts_per_example",
            "= 1 gives every completion an advantage of 0: the trainer learns nothing",
            "sample at least 2 completions per prompt (8 is common)",
        )


ORCHESTRATOR_RULES = (batch_holds_whole_groups, single_rollouts_learn_nothing)
