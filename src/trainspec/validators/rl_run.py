"""The combined RL config (`rl`, schema rl.json): shared settings copied down, then the
trainer's and the orchestrator's own rules on their tables.

Shared settings are written once at the top. `propagate_shared` copies each one that is set into
both sub-configs before they are built; a sub-config that sets the same setting to a different
value is an error naming both places, because the two processes must agree.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import TYPE_CHECKING, Any

from trainspec.kinds import Kind

from .context import RuleContext

if TYPE_CHECKING:
    from trainspec.generated.rl import RLConfig

# top-level path → the paths it is copied to
SHARED: dict[str, tuple[str, ...]] = {
    "model.name": ("trainer.model.name", "orchestrator.model.name"),
    "max_steps": ("trainer.max_steps", "orchestrator.max_steps"),
    "seq_len": ("trainer.model.seq_len", "orchestrator.seq_len"),
    "output_dir": ("trainer.output_dir", "orchestrator.output_dir"),
    "deployment.num_train_gpus": ("orchestrator.trainer_ranks",),
}
DEFAULT_OUTPUT_DIR = "outputs"


def _get(doc: dict, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def _set(doc: dict, path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        doc = doc.setdefault(part, {})
    doc[leaf] = value


def propagate_shared(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of the raw document with every set shared value written into the sub-configs
    (where they do not set it themselves; conflicts are left for `shared_settings_agree`)."""
    doc = copy.deepcopy(document)
    if "output_dir" not in doc:
        doc["output_dir"] = DEFAULT_OUTPUT_DIR
    for source, targets in SHARED.items():
        value = _get(doc, source)
        if value is None or value == "None":
            continue
        for target in targets:
            if _get(doc, target) is None:
                _set(doc, target, value)
    return doc


def shared_settings_agree(cfg: RLConfig, ctx: RuleContext) -> None:
    """A shared setting at the top (e.g. max_steps) must not differ in [trainer] or [orchestrator].

    The shared settings are model.name, max_steps, seq_len, output_dir and
    deployment.num_train_gpus (which sets orchestrator.trainer_ranks); the top value is copied
    into the tables that do not set it."""
    document = cfg.model_dump()
    for source, targets in SHARED.items():
        value = _get(document, source)
        if value is None:
            continue
        for target in targets:
            own = _get(document, target)
            if own != value:
                ctx.error(
                    target,
                    f"= {own!r} disagrees with {source} = {value!r} at the top",
                    f"set {source} once at the top and drop {target}",
                    related=(source,),
                )


def transports_agree(cfg: RLConfig, ctx: RuleContext) -> None:
    """[trainer.rollout_transport] and [trainer.weight_broadcast] must match the orchestrator's."""
    for name in ("rollout_transport", "weight_broadcast"):
        mine = getattr(cfg.trainer, name).model_dump()
        theirs = getattr(cfg.orchestrator, name).model_dump()
        if mine != theirs:
            ctx.error(
                f"orchestrator.{name}",
                f"= {theirs} differs from trainer.{name} = {mine}: they could not reach each other",
                f"give [trainer.{name}] and [orchestrator.{name}] the same settings",
                related=(f"trainer.{name}",),
            )


def _nested(kind: Kind, prefix: str):
    def rule(cfg: RLConfig, ctx: RuleContext) -> None:
        from .pipeline import run_rules

        inner = run_rules(getattr(cfg, prefix), kind)  # mutates the sub-config (auto values)

        def moved(issue):
            return dataclasses.replace(
                issue,
                path=f"{prefix}.{issue.path}",
                related=tuple(f"{prefix}.{r}" for r in issue.related),
                key=(prefix, *issue.key) if issue.key else (),
            )

        ctx.errors.extend(moved(issue) for issue in inner.errors)
        ctx.warnings.extend(moved(issue) for issue in inner.warnings)

    rule.__name__ = f"{prefix}_rules"
    rule.__doc__ = (
        f"[{prefix}] is checked like a standalone {prefix} config (issues under {prefix}.*)."
    )
    return rule


RL_RUN_RULES = (
    shared_settings_agree,
    _nested("rl", "trainer"),
    _nested("orchestrator", "orchestrator"),
    transports_agree,
)
