"""Rules of the SFT trainer only; they run after the shared rules.

The online evals' rules (the reference's propagate_model_to_inference and
auto_setup_online_eval) live in online_evals.py and run here, after the deployment's.

Not carried over from the reference, because the fields they act on are out of the first scope:
validate_typed_renderer (renderer), validate_deployment and auto_setup_slurm_template (slurm),
normalize_deployment (trainspec rejects the keys it dropped).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainspec.generated.deployment import MultiNodeDeploymentConfig, SingleNodeDeploymentConfig
from trainspec.generated.sft_data import FakeDataConfig
from trainspec.run_identity import identity_digest, run_identity

from .context import RuleContext
from .online_evals import ONLINE_EVAL_RULES
from .run_paths import run_dir_is_one_name
from .shared import fsdp_group_replicas
from .slurm import sbatch_values_are_words

if TYPE_CHECKING:
    from trainspec.generated.sft_trainer import SFTTrainerConfig


# Fields that do not change what is trained; editing them keeps the derived run name, so a
# crashed or extended run resumes in the same directory.
def _data_tables(cfg):
    """(dotted path, data table) of the training data and, when present, the validation data."""
    tables = [("data", cfg.data)]
    if cfg.val is not None:
        tables.append(("val.data", cfg.val.data))
    return tables


def validate_batch_size(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """data.batch_size (and val.data.batch_size) must be a multiple of its micro_batch_size."""
    for path, data in _data_tables(cfg):
        if data.batch_size % data.micro_batch_size:
            ctx.error(
                f"{path}.batch_size",
                f"= {data.batch_size} is not a multiple of {path}.micro_batch_size "
                f"= {data.micro_batch_size}",
                f"make {path}.batch_size a multiple of {path}.micro_batch_size",
            )


def validate_subsets_and_splits(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """data.subsets, data.splits and data.probabilities, if given, match in length (val.data too).

    A list left unset or empty is not compared; fake data has none of them."""
    for path, data in _data_tables(cfg):
        if isinstance(data, FakeDataConfig):
            continue
        lists = {k: getattr(data, k) for k in ("subsets", "splits") if getattr(data, k)}
        if len(lists) == 2 and len(data.subsets) != len(data.splits):
            ctx.error(
                f"{path}.splits",
                f"has {len(data.splits)} entries but {path}.subsets has {len(data.subsets)}",
                "give one split per subset",
            )
        if data.probabilities is not None:
            for name, values in lists.items():
                if len(values) != len(data.probabilities):
                    ctx.error(
                        f"{path}.probabilities",
                        f"has {len(data.probabilities)} entries but {path}.{name} has "
                        f"{len(values)}",
                        f"give one probability per entry of {path}.{name}",
                    )


def validate_gpu_count(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """A single_node deployment.num_train_gpus must not exceed deployment.gpus_per_node."""
    dep = cfg.deployment
    if isinstance(dep, SingleNodeDeploymentConfig) and dep.num_train_gpus > dep.gpus_per_node:
        ctx.error(
            "deployment.num_train_gpus",
            f"= {dep.num_train_gpus} exceeds deployment.gpus_per_node = {dep.gpus_per_node}",
            "lower num_train_gpus, raise gpus_per_node, or use a multi_node deployment",
        )


def validate_cp_seq_len(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """With model.cp > 1, data.seq_len (and val.data.seq_len) must be a multiple of model.cp."""
    cp = cfg.model.cp
    if cp <= 1:
        return
    for path, data in _data_tables(cfg):
        if data.seq_len % cp:
            ctx.error(
                f"{path}.seq_len",
                f"= {data.seq_len} is not divisible by model.cp = {cp}",
                f"make {path}.seq_len a multiple of {cp}",
                related=("model.cp",),
            )


def validate_cp_micro_batch_size(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """With model.cp > 1, data.micro_batch_size (and val.data.micro_batch_size) must be 1."""
    cp = cfg.model.cp
    if cp <= 1:
        return
    for path, data in _data_tables(cfg):
        if data.micro_batch_size != 1:
            ctx.error(
                f"{path}.micro_batch_size",
                f"must be 1 with context parallelism (model.cp = {cp}), "
                f"got {data.micro_batch_size}",
                f"set {path}.micro_batch_size = 1",
                related=("model.cp",),
            )


def validate_vlm_constraints(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """A VLM ([model.vlm]) needs data.micro_batch_size (and val.data.micro_batch_size) = 1.

    That its dtypes are "bfloat16" is checked by a rule shared with RL."""
    if cfg.model.vlm is None:
        return
    for path, data in _data_tables(cfg):
        if data.micro_batch_size != 1:
            ctx.error(
                f"{path}.micro_batch_size",
                f"must be 1 when training a VLM ([model.vlm]), got {data.micro_batch_size}",
                f"set {path}.micro_batch_size = 1",
                related=("model.vlm",),
            )


def resolve_dp_replicate_from_deployment(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """model.dp_replicate is set to deployment.num_train_nodes / deployment.nodes_per_fsdp_group.

    Only for a multi_node deployment that sets nodes_per_fsdp_group, which must divide
    num_train_nodes (the reference's auto_setup_deployment). A different model.dp_replicate
    written in the config is replaced, with a warning."""
    dep = cfg.deployment
    if not isinstance(dep, MultiNodeDeploymentConfig):
        return
    replicas = fsdp_group_replicas(dep, ctx)
    if replicas is None:
        return
    if cfg.model.dp_replicate != replicas:
        if "dp_replicate" in cfg.model.model_fields_set:  # written by the user: say so
            ctx.warn(
                "model.dp_replicate",
                f"set to {replicas} (was {cfg.model.dp_replicate}): "
                f"deployment.num_train_nodes / deployment.nodes_per_fsdp_group = {replicas}",
                "drop model.dp_replicate or deployment.nodes_per_fsdp_group",
            )
        ctx.resolve(cfg.model, "dp_replicate", replicas)


def _last_part(name: str) -> str:
    """`org/model` → `model`, `data/chats.jsonl` → `chats.jsonl`, `builtin:x` → `x`."""
    return name.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


def config_digest(cfg: SFTTrainerConfig) -> str:
    """8 hex digits of what a config trains: its run identity (trainspec.run_identity), the
    settings that change training and differ from their defaults."""
    return identity_digest(run_identity(cfg, "sft"))


def resolve_run_name(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """run.name defaults to data--model--digest, and run.dir and monitors.wandb.name to run.name.

    The parts are the last part of data.name (left out for fake data) and of model.name, and 8
    hex digits of the run's identity: the settings that change what is trained and differ from
    their defaults (not output_dir, ckpt, log, max_steps, val, deployment, ...), so relaunching,
    resuming or extending a run finds its directory again; the whole is lowercased."""
    run = cfg.run
    if run.name is None:
        parts = [] if isinstance(cfg.data, FakeDataConfig) else [_last_part(cfg.data.name)]
        parts += [_last_part(cfg.model.name), config_digest(cfg)]
        ctx.resolve(run, "name", "--".join(parts).lower())
    if run.dir is None:
        ctx.resolve(run, "dir", run.name)
    wandb = cfg.monitors.wandb
    if wandb is not None and wandb.name is None:
        ctx.resolve(wandb, "name", run.name)


SFT_RULES = (
    validate_batch_size,
    validate_subsets_and_splits,
    validate_gpu_count,
    *ONLINE_EVAL_RULES,
    validate_cp_seq_len,
    validate_cp_micro_batch_size,
    validate_vlm_constraints,
    resolve_dp_replicate_from_deployment,
    resolve_run_name,
    run_dir_is_one_name,
    sbatch_values_are_words,
)
