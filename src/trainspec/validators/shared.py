"""Rules shared by the RL and SFT trainers; they run before the rules of either mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainspec.generated.optimizer import MuonConfig
from trainspec.generated.scheduler import CosineSchedulerConfig, LinearSchedulerConfig
from trainspec.issues import dotted

from .context import RuleContext, show

if TYPE_CHECKING:
    from trainspec.generated.base_trainer import BaseTrainerConfig
    from trainspec.generated.rl_trainer import RLTrainerConfig
    from trainspec.generated.sft_trainer import SFTTrainerConfig

PROTECTED_ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "PRL_RUN_ID",
    "PRL_RUN_NAME",
    "WANDB_RUN_ID",
    "WANDB_SHARED_MODE",
    "WANDB_SHARED_LABEL",
    "WANDB_SHARED_PRIMARY",
    "WANDB_SHARED_FINISHER",
)
FULL_OFFLOAD_OPTIMIZERS = ("adamw", "sign_sgd")
MAX_TRACE_STEPS = 10


def reject_protected_env_vars(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """[env_vars] cannot set variables the launcher sets (CUDA_VISIBLE_DEVICES, WANDB_RUN_ID, ...).

    These are CUDA_VISIBLE_DEVICES, PRL_RUN_ID, PRL_RUN_NAME, WANDB_RUN_ID, WANDB_SHARED_MODE,
    WANDB_SHARED_LABEL, WANDB_SHARED_PRIMARY and WANDB_SHARED_FINISHER."""
    for key in cfg.env_vars:
        if key in PROTECTED_ENV_VARS:
            ctx.error(
                dotted(("env_vars", key)),
                "is set by the launcher and cannot be overridden",
                f"remove {key} from [env_vars]",
                about_key=True,
                key=("env_vars", key),
            )


def validate_env_var_names(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """[env_vars] names are not empty and hold no "=" or NUL; values hold no NUL."""
    for key, value in cfg.env_vars.items():
        where = ("env_vars", key)
        if not key or "=" in key or "\0" in key:
            ctx.error(
                dotted(where),
                f"cannot name an environment variable ({show(key)}): a name is not empty and "
                "holds no '=' or NUL",
                f"rename {show(key)} in [env_vars]",
                about_key=True,
                key=where,
            )
        elif "\0" in value:
            ctx.error(
                dotted(where),
                "contains a NUL character, which no environment variable can hold",
                f"remove the NUL from {dotted(where)}",
                key=where,
            )


def _disable_grad_clipping(
    cfg: BaseTrainerConfig, ctx: RuleContext, because: str, setting: str
) -> None:
    if cfg.optim.max_norm is not None:
        ctx.warn(
            "optim.max_norm",
            f"set to null (was {cfg.optim.max_norm}): {because} does not support gradient clipping",
            'set optim.max_norm = "None" to silence this warning',
            related=(setting,),
        )
        ctx.resolve(cfg.optim, "max_norm", None)


def resolve_no_grad_clipping_with_deepep(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.ep_comm_backend "deepep" sets optim.max_norm to null (no clipping), with a warning."""
    if cfg.model.ep_comm_backend == "deepep":
        _disable_grad_clipping(
            cfg, ctx, 'model.ep_comm_backend = "deepep"', "model.ep_comm_backend"
        )


def full_optimizer_offload_requires_supported_optimizer(
    cfg: BaseTrainerConfig, ctx: RuleContext
) -> None:
    """[model.full_offload] needs optim.type "adamw" or "sign_sgd"."""
    if cfg.model.full_offload is not None and cfg.optim.type not in FULL_OFFLOAD_OPTIMIZERS:
        ctx.error(
            "optim.type",
            f"= {show(cfg.optim.type)} cannot run on the CPU optimizer of model.full_offload, "
            'which supports "adamw" and "sign_sgd"',
            'set optim.type = "adamw" (or "sign_sgd"), or remove [model.full_offload]',
            related=("model.full_offload",),
        )


def resolve_no_grad_clipping_with_full_offload(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """[model.full_offload] sets optim.max_norm to null (no clipping), with a warning."""
    if cfg.model.full_offload is not None:
        _disable_grad_clipping(cfg, ctx, "model.full_offload", "model.full_offload")


def vlms_require_bfloat16(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """A VLM ([model.vlm]) needs model.optimization_dtype and model.reduce_dtype "bfloat16"."""
    model = cfg.model
    if model.vlm is None:
        return
    for name in ("optimization_dtype", "reduce_dtype"):
        value = getattr(model, name)
        if value != "bfloat16":
            ctx.error(
                f"model.{name}",
                f'must be "bfloat16" when training a VLM ([model.vlm]), got {show(value)}',
                f'set model.{name} = "bfloat16"',
                related=("model.vlm",),
            )


def vlm_freeze_incompatible_with_lora(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.vlm.freeze_vision_encoder = false cannot be combined with [model.lora]."""
    model = cfg.model
    if model.vlm is not None and not model.vlm.freeze_vision_encoder and model.lora is not None:
        ctx.error(
            "model.vlm.freeze_vision_encoder",
            "= false (training the vision encoder) cannot be combined with [model.lora]",
            "set model.vlm.freeze_vision_encoder = true, or remove [model.lora]",
        )


def dont_do_massive_traces(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """With trace_path set, max_steps must be set and below 10 (traces grow with every step)."""
    if cfg.trace_path is None:
        return
    if cfg.max_steps is None or cfg.max_steps >= MAX_TRACE_STEPS:
        ctx.error(
            "max_steps",
            f"must be below {MAX_TRACE_STEPS} when trace_path is set (traces grow with every "
            f"step), got {show(cfg.max_steps)}",
            f"set max_steps to at most {MAX_TRACE_STEPS - 1}, or remove trace_path",
            related=("trace_path",),
        )


def validate_scheduler_steps(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """A cosine or decaying linear schedule needs max_steps, with warmup and decay fitting in it.

    Linear: scheduler.warmup_steps and scheduler.decay_steps are not both 0, and with decay_steps
    above 0, max_steps is set and warmup_steps + decay_steps is at most max_steps. Cosine:
    max_steps is set and scheduler.warmup_steps is below it."""
    sched, max_steps = cfg.scheduler, cfg.max_steps
    if isinstance(sched, LinearSchedulerConfig):
        if sched.warmup_steps == 0 and sched.decay_steps == 0:
            ctx.error(
                "scheduler",
                "has warmup_steps = 0 and decay_steps = 0, so the linear schedule changes nothing",
                'set scheduler.warmup_steps or scheduler.decay_steps, or use type = "constant"',
            )
        if sched.decay_steps > 0:
            if max_steps is None:
                ctx.error(
                    "max_steps",
                    f"is required by the linear schedule's decay "
                    f"(scheduler.decay_steps = {sched.decay_steps}), which ends at max_steps",
                    "set max_steps, or set scheduler.decay_steps = 0",
                    related=("scheduler.decay_steps", "scheduler.type"),
                )
            elif sched.warmup_steps + sched.decay_steps > max_steps:
                ctx.error(
                    "scheduler",
                    f"has warmup_steps + decay_steps = {sched.warmup_steps} + "
                    f"{sched.decay_steps}, more than max_steps = {max_steps}",
                    "raise max_steps or shorten the warmup or decay",
                )
    elif isinstance(sched, CosineSchedulerConfig):
        if max_steps is None:
            ctx.error(
                "max_steps",
                "is required by the cosine schedule, which decays until max_steps",
                'set max_steps, or use scheduler type "constant" or "linear"',
                related=("scheduler.type",),
            )
        elif sched.warmup_steps >= max_steps:
            ctx.error(
                "scheduler.warmup_steps",
                f"= {sched.warmup_steps} must be below max_steps = {max_steps}",
                "shorten the warmup or raise max_steps",
            )


def validate_opt_and_fsdp_offload(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """optim.type "muon" cannot be combined with model.fsdp_cpu_offload = true."""
    if isinstance(cfg.optim, MuonConfig) and cfg.model.fsdp_cpu_offload:
        ctx.error(
            "optim.type",
            '= "muon" cannot be combined with model.fsdp_cpu_offload = true',
            "use another optimizer, or set model.fsdp_cpu_offload = false",
            related=("model.fsdp_cpu_offload",),
        )


def ep_only_with_custom_impl(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.ep above 1 needs model.impl "custom" or "auto"."""
    model = cfg.model
    if isinstance(model.ep, int) and model.ep != 1 and model.impl == "hf":
        ctx.error(
            "model.ep",
            f'= {model.ep} (expert parallelism) needs model.impl "custom" or "auto", got "hf"',
            'set model.impl = "custom", or set model.ep = 1',
        )


def resolve_tokenizer_from_model(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """Unset tokenizer.name and tokenizer.trust_remote_code are copied from their model.* namesakes.

    That is, from model.name and model.trust_remote_code (the reference's auto_setup_tokenizer)."""
    if cfg.tokenizer.name is None:
        ctx.resolve(cfg.tokenizer, "name", cfg.model.name)
    if cfg.tokenizer.trust_remote_code is None:
        ctx.resolve(cfg.tokenizer, "trust_remote_code", cfg.model.trust_remote_code)


def validate_control_signals(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """control.stop_signal and control.checkpoint_signal must be different signals."""
    control = cfg.control
    if control is None or control.checkpoint_signal is None:
        return
    if control.checkpoint_signal == control.stop_signal:
        ctx.error(
            "control.stop_signal",
            f"= {show(control.stop_signal)} is also control.checkpoint_signal; one signal "
            "cannot mean both",
            'pick different signals, or set one of them to "None"',
        )


def validate_step_xor_dir(cfg: RLTrainerConfig | SFTTrainerConfig, ctx: RuleContext) -> None:
    """Set resume.step (a step of this run) or resume.dir (another run's step directory), not both.

    (That the directory is a step_<N> one is the schema's pattern on resume.dir.)"""
    resume = cfg.resume
    if resume is None or resume.dir is None:
        return
    if resume.step is not None:
        ctx.error(
            "resume",
            f"sets both step = {resume.step} and dir = {show(resume.dir)}",
            "keep resume.step to resume this run, or resume.dir to fork another run's step",
        )


def fsdp_group_replicas(dep, ctx: RuleContext, related: tuple[str, ...] = ()) -> int | None:
    """The FSDP replicas of a multi-node deployment's node groups (num_train_nodes /
    nodes_per_fsdp_group, the reference's auto_setup_deployment): None when the groups are
    not set, or do not divide the nodes (an error)."""
    if dep.nodes_per_fsdp_group is None:
        return None
    if dep.num_train_nodes % dep.nodes_per_fsdp_group:
        ctx.error(
            "deployment.nodes_per_fsdp_group",
            f"= {dep.nodes_per_fsdp_group} does not divide deployment.num_train_nodes "
            f"= {dep.num_train_nodes}",
            "pick a nodes_per_fsdp_group that divides num_train_nodes",
            related=related,
        )
        return None
    return dep.num_train_nodes // dep.nodes_per_fsdp_group
