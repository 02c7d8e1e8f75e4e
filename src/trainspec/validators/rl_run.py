"""The combined RL config (`rl`, schema rl.json): shared settings copied down, then the
trainer's and the orchestrator's own rules on their tables.

Shared settings are written once at the top. `propagate_shared` copies each one that is set into
both sub-configs before they are built; a sub-config that sets the same setting to a different
value is an error naming both places, because the two processes must agree.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from trainspec.kinds import Kind

from .context import RuleContext
from .run_paths import run_dir_is_one_name
from .shared import fsdp_group_replicas, reject_protected_env_vars, validate_env_var_names
from .slurm import exported_env_names_are_shell_names, sbatch_values_are_words

if TYPE_CHECKING:
    from trainspec.generated.rl import RLConfig

# top-level path → the paths it is copied to (the reference's shared keys)
SHARED: dict[str, tuple[str, ...]] = {
    "model.name": ("trainer.model.name", "orchestrator.model.name"),
    "model.vlm": ("trainer.model.vlm", "orchestrator.model.vlm"),
    "max_steps": ("trainer.max_steps", "orchestrator.max_steps"),
    "seq_len": ("trainer.model.seq_len", "orchestrator.seq_len"),
    "deployment.num_train_gpus": ("orchestrator.num_train_workers",),
    "log.level": ("trainer.log.level", "orchestrator.log.level"),
    "log.json_logging": ("trainer.log.json_logging", "orchestrator.log.json_logging"),
    "ckpt.output_dir": ("trainer.ckpt.output_dir",),
    **{
        f"ckpt.{key}": (f"trainer.ckpt.{key}", f"orchestrator.ckpt.{key}")
        for key in ("interval", "keep_last", "keep_interval")
    },
    **{
        f"monitors.wandb.{key}": (
            f"trainer.monitors.wandb.{key}",
            f"orchestrator.monitors.wandb.{key}",
        )
        for key in ("project", "entity", "name", "group", "tags", "offline")
    },
    "monitors.file.path": ("trainer.monitors.file.path", "orchestrator.monitors.file.path"),
    "monitors.prime.name": ("orchestrator.monitors.prime.name",),
    **{
        f"tokenizer.{key}": (f"trainer.tokenizer.{key}", f"orchestrator.tokenizer.{key}")
        for key in ("name", "trust_remote_code", "chat_template")
    },
    "resume": ("trainer.resume", "orchestrator.resume"),
    "weight_broadcast": ("trainer.weight_broadcast", "orchestrator.weight_broadcast"),
    "rollout_transport": ("trainer.rollout_transport", "orchestrator.rollout_transport"),
}
# A present table turns the sub-configs' table on (as {}) where they do not have it.
PRESENCE: dict[str, tuple[str, ...]] = {
    "ckpt": ("trainer.ckpt", "orchestrator.ckpt"),
    "monitors.wandb": ("trainer.monitors.wandb", "orchestrator.monitors.wandb"),
    "monitors.file": ("trainer.monitors.file", "orchestrator.monitors.file"),
    "monitors.prime": ("orchestrator.monitors.prime",),
}
RUN_DIRS = ("trainer.output_dir", "orchestrator.output_dir")
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


def _unset(value: Any) -> bool:
    return value is None or value == "None"


def run_dir(document: dict[str, Any]) -> str:
    """output_dir, or output_dir/run.dir (run.dir defaulting to run.name) when [run] names one."""
    output_dir = document.get("output_dir", DEFAULT_OUTPUT_DIR)
    run = document.get("run")
    run = run if isinstance(run, dict) else {}
    name = next((v for v in (run.get("dir"), run.get("name")) if not _unset(v)), None)
    return str(PurePosixPath(output_dir) / name) if name else output_dir


def propagate_shared(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of the raw document with every shared value the user set written into the
    sub-configs where they do not set it (a differing value is left for
    `shared_settings_agree`); present shared tables turn the sub-configs' tables on."""
    doc = copy.deepcopy(document)
    for target in RUN_DIRS:
        if _get(doc, target) is None:
            _set(doc, target, run_dir(doc))
    for source, targets in SHARED.items():
        value = _get(doc, source)
        if _unset(value):
            continue
        for target in targets:
            if _get(doc, target) is None:
                _set(doc, target, copy.deepcopy(value))
    for source, targets in PRESENCE.items():
        if not isinstance(_get(doc, source), dict):
            continue
        for target in targets:
            if _get(doc, target) is None:
                _set(doc, target, {})
    return doc


def shared_settings_agree(cfg: RLConfig, ctx: RuleContext) -> None:
    """A shared setting at the top (e.g. max_steps) must not differ in [trainer] or [orchestrator].

    The shared settings are the reference's: model.name / vlm, max_steps, seq_len, log.*,
    ckpt.*, monitors.wandb.* / file.path / prime.name, tokenizer.*, resume, weight_broadcast,
    rollout_transport, deployment.num_train_gpus (which sets orchestrator.num_train_workers) and
    output_dir with [run] (the run directory, trainer.output_dir and orchestrator.output_dir);
    the top value is copied into the tables that do not set it."""
    document = cfg.model_dump()
    expected = {
        source: _get(document, source) if source in ALWAYS or _written(cfg, source) else None
        for source in SHARED
    }
    expected["output_dir"] = run_dir(document)
    pairs = [*SHARED.items(), ("output_dir", RUN_DIRS)]
    for source, targets in pairs:
        value = expected[source]
        if value is None:
            continue
        for target in targets:
            own = _get(document, target)
            if own != value and not _same_table(own, value):
                ctx.error(
                    target,
                    f"= {own!r} disagrees with {source} = {value!r} at the top",
                    f"set {source} once at the top and drop {target}",
                    related=(source,),
                )


# Shared settings whose default counts as set: the trainer processes and the run directory.
ALWAYS = ("deployment.num_train_gpus",)


def _written(cfg: Any, path: str) -> bool:
    """Whether the user wrote `path` (a class default never propagates)."""
    table = cfg
    for part in path.split("."):
        if table is None or part not in getattr(table, "model_fields_set", ()):
            return False
        table = getattr(table, part)
    return True


def _same_table(own: Any, value: Any) -> bool:
    """A sub-config's table agrees with a shared one that it extends with its own defaults."""
    if not (isinstance(own, dict) and isinstance(value, dict)):
        return False
    return all(own.get(key) == item for key, item in value.items())


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


def top_env_vars_protected(cfg: RLConfig, ctx: RuleContext) -> None:
    """The top-level [env_vars] cannot set what the launcher sets (as reject_protected_env_vars
    checks each process's own)."""
    reject_protected_env_vars(cfg, ctx)  # type: ignore[arg-type]  # reads env_vars only


def top_env_var_names(cfg: RLConfig, ctx: RuleContext) -> None:
    """The top-level [env_vars] names and values are valid (as validate_env_var_names checks)."""
    validate_env_var_names(cfg, ctx)  # type: ignore[arg-type]  # reads env_vars only


def gpus_fit_the_node(cfg: RLConfig, ctx: RuleContext) -> None:
    """One node holds the trainer's GPUs and, with [inference], the inference server's:
    deployment.num_train_gpus (+ num_infer_gpus) must not exceed deployment.gpus_per_node."""
    dep = cfg.deployment
    if dep.type != "single_node":
        return
    used = dep.num_train_gpus + (dep.num_infer_gpus if cfg.inference is not None else 0)
    if used > dep.gpus_per_node:
        which = "num_train_gpus + num_infer_gpus" if cfg.inference is not None else "num_train_gpus"
        ctx.error(
            "deployment.num_train_gpus",
            f"{which} = {used} exceeds deployment.gpus_per_node = {dep.gpus_per_node}",
            "use fewer GPUs, or raise gpus_per_node",
            related=("deployment.gpus_per_node",),
        )


def resolve_multi_node_deployment(cfg: RLConfig, ctx: RuleContext) -> None:
    """A multi_node deployment sizes both sides: orchestrator.num_train_workers becomes the
    trainer's processes (num_train_nodes x gpus_per_node), nodes_per_fsdp_group (which must
    divide num_train_nodes) sets trainer.model.dp_replicate, and an unset num_infer_nodes
    becomes 1 with [inference], else 0 (the reference's auto_setup_infer_nodes and the
    multi-node part of auto_setup_deployment). A differing value written in [orchestrator] or
    [trainer.model] is an error naming both places."""
    dep = cfg.deployment
    if dep.type != "multi_node":
        return
    if dep.num_infer_nodes is None:
        ctx.resolve(dep, "num_infer_nodes", 1 if cfg.inference is not None else 0)
    derived = [("orchestrator.num_train_workers", dep.num_train_nodes * dep.gpus_per_node)]
    replicas = fsdp_group_replicas(dep, ctx, related=("deployment.num_train_nodes",))
    if replicas is not None:
        derived.append(("trainer.model.dp_replicate", replicas))
    for path, value in derived:
        side, *middle, name = path.split(".")
        table = getattr(cfg, side)
        for part in middle:
            table = getattr(table, part)
        if _written(cfg, path) and getattr(table, name) != value:
            ctx.error(
                path,
                f"= {getattr(table, name)} disagrees with the multi_node deployment, which "
                f"makes it {value}",
                f"drop {path} (the deployment sets it)",
                related=("deployment.num_train_nodes", "deployment.gpus_per_node"),
            )
        else:
            ctx.resolve(table, name, value)


def validate_multi_node_inference(cfg: RLConfig, ctx: RuleContext) -> None:
    """Inference nodes serve [inference]: deployment.num_infer_nodes > 0 needs it, and 0 (a run
    without inference or orchestrator) forbids it and needs [trainer.data.fake] (the
    reference's validate_deployment)."""
    dep = cfg.deployment
    if dep.type != "multi_node" or dep.num_infer_nodes is None:
        return
    if dep.num_infer_nodes > 0 and cfg.inference is None:
        ctx.error(
            "deployment.num_infer_nodes",
            f"= {dep.num_infer_nodes}: inference nodes run the server [inference] describes, "
            "and there is no [inference]",
            "add [inference], or set num_infer_nodes = 0 (then no orchestrator runs: the "
            "trainer needs [trainer.data.fake])",
            related=("inference",),
        )
    if dep.num_infer_nodes == 0 and cfg.inference is not None:
        ctx.error(
            "inference",
            "is set, but deployment.num_infer_nodes = 0 gives it no node",
            "set deployment.num_infer_nodes to 1 or more, or drop [inference]",
            related=("deployment.num_infer_nodes",),
        )
    elif dep.num_infer_nodes == 0 and cfg.trainer.data.fake is None:
        ctx.error(
            "deployment.num_infer_nodes",
            "= 0 runs no inference and no orchestrator, so nothing feeds the trainer",
            "set [trainer.data.fake] for synthetic batches, or give [inference] a node",
            related=("trainer.data.fake",),
        )


RL_RUN_RULES = (
    top_env_vars_protected,
    top_env_var_names,
    exported_env_names_are_shell_names,
    run_dir_is_one_name,
    sbatch_values_are_words,
    gpus_fit_the_node,
    resolve_multi_node_deployment,
    validate_multi_node_inference,
    shared_settings_agree,
    _nested("rl", "trainer"),
    _nested("orchestrator", "orchestrator"),
    transports_agree,
)
