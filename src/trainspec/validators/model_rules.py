"""Rules of the [model] table and its sub-tables; they run wherever `model` appears."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainspec.generated.model import ActivationCheckpointConfig, MXFP8Config

from .context import RuleContext, show

if TYPE_CHECKING:
    from trainspec.generated.base_trainer import BaseTrainerConfig

CUSTOM_IMPLS = ("custom", "auto")


def resolve_duplicate_ac_targets(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """Duplicate model.ac.targets are removed (with a warning)."""
    ac = cfg.model.ac
    if ac is None:
        return
    unique = list(dict.fromkeys(ac.targets))
    if unique != ac.targets:
        ctx.warn(
            "model.ac.targets",
            f"had duplicates removed, now {show(unique)}",
            f"write each target once: targets = {show(unique)}",
        )
        ctx.resolve(ac, "targets", unique)


def validate_selective_targets(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.ac.mode "selective" needs at least one entry in model.ac.targets."""
    ac = cfg.model.ac
    if ac is not None and ac.mode == "selective" and not ac.targets:
        ctx.error(
            "model.ac.targets",
            'is empty, but model.ac.mode = "selective" needs at least one target',
            'list the parts to recompute, e.g. targets = ["norm", "mlp"], or set mode = "full"',
        )


def trust_remote_code_only_with_hf(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.trust_remote_code = true needs model.impl "hf" or "auto"."""
    model = cfg.model
    if model.trust_remote_code and model.impl not in ("hf", "auto"):
        ctx.error(
            "model.trust_remote_code",
            f'= true runs the repository\'s own code, which only impl "hf" or "auto" '
            f"loads; model.impl = {show(model.impl)}",
            'set model.impl = "hf" (or "auto"), or set model.trust_remote_code = false',
        )


def vlm_only_with_custom_impl(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """[model.vlm] (training a VLM) needs model.impl "custom"."""
    model = cfg.model
    if model.vlm is not None and model.impl != "custom":
        ctx.error(
            "model.vlm",
            f'needs model.impl = "custom", got {show(model.impl)}',
            'set model.impl = "custom", or remove [model.vlm]',
        )


def vlm_cp_requires_ulysses(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """A VLM ([model.vlm]) with model.cp > 1 needs model.cp_style "ulysses"."""
    model = cfg.model
    if model.vlm is not None and model.cp > 1 and model.cp_style != "ulysses":
        ctx.error(
            "model.cp_style",
            f'must be "ulysses" for a VLM with context parallelism (model.cp = {model.cp}), '
            f"got {show(model.cp_style)}",
            'set model.cp_style = "ulysses", or set model.cp = 1',
            related=("model.cp", "model.vlm"),
        )


def validate_cp(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.cp > 1 needs model.impl "custom" or "auto"."""
    model = cfg.model
    if model.cp > 1 and model.impl not in CUSTOM_IMPLS:
        ctx.error(
            "model.cp",
            f'= {model.cp} (context parallelism) needs model.impl "custom" or "auto", '
            f"got {show(model.impl)}",
            'set model.impl = "custom" (or "auto"), or set model.cp = 1',
        )


def resolve_ac_for_ac_offloading(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.ac = "None" gets its defaults back while model.ac_offloading is on (with a warning).

    model.ac_offloading offloads checkpointed activations, so it needs activation checkpointing;
    it is on by default, so turning both off takes model.ac_offloading = "None" too."""
    model = cfg.model
    if model.ac_offloading is not None and model.ac is None:
        ctx.resolve(model, "ac", ActivationCheckpointConfig())
        ctx.warn(
            "model.ac",
            "turned back on with defaults: model.ac_offloading offloads checkpointed "
            "activations, so it needs activation checkpointing",
            'to turn both off, also set model.ac_offloading = "None"',
        )


def selective_ac_only_with_custom_impl(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.ac.mode "selective" needs model.impl "custom" or "auto"."""
    model = cfg.model
    if model.ac is not None and model.ac.mode == "selective" and model.impl not in CUSTOM_IMPLS:
        ctx.error(
            "model.ac.mode",
            f'= "selective" needs model.impl "custom" or "auto", got {show(model.impl)}',
            'set model.ac.mode = "full", or set model.impl = "custom"',
        )


def cpu_offload_mutual_exclusion(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.fsdp_cpu_offload, model.optim_cpu_offload and [model.full_offload] exclude each other.

    model.optim_cpu_offload defaults to true, so turning on either of the others needs
    model.optim_cpu_offload = false."""
    model = cfg.model
    full = model.full_offload is not None
    if model.fsdp_cpu_offload and model.optim_cpu_offload:
        ctx.error(
            "model.fsdp_cpu_offload",
            "= true already offloads the optimizer state, so model.optim_cpu_offload "
            "must be false (it defaults to true)",
            "set model.optim_cpu_offload = false, or set model.fsdp_cpu_offload = false",
        )
    if model.fsdp_cpu_offload and full:
        ctx.error(
            "model.full_offload",
            "cannot be combined with model.fsdp_cpu_offload = true",
            "remove [model.full_offload], or set model.fsdp_cpu_offload = false",
        )
    if model.optim_cpu_offload and full:
        ctx.error(
            "model.full_offload",
            "runs the optimizer on the CPU itself, so model.optim_cpu_offload must be false "
            "(it defaults to true)",
            "set model.optim_cpu_offload = false, or remove [model.full_offload]",
        )


def flash_attention_4_only_with_custom_impl(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.attn "flash_attention_4" or "auto" needs model.impl "custom" or "auto"."""
    model = cfg.model
    if model.attn in ("flash_attention_4", "auto") and model.impl not in CUSTOM_IMPLS:
        ctx.error(
            "model.attn",
            f'= {show(model.attn)} needs model.impl "custom" or "auto", got {show(model.impl)}',
            'with impl = "hf", set model.attn = "sdpa", "eager", "flash_attention_2" or '
            '"flash_attention_3"',
            related=("model.impl",),
        )


def quantization_only_with_custom_impl(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """[model.quantization] needs model.impl "custom" or "auto"."""
    model = cfg.model
    if model.quantization is not None and model.impl not in CUSTOM_IMPLS:
        ctx.error(
            "model.quantization",
            f'needs model.impl "custom" or "auto", got {show(model.impl)}',
            'set model.impl = "custom", or remove [model.quantization]',
        )


def validate_ep_comm_backend(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.ep_comm_backend "deepep" needs model.ep above 1 or "auto"."""
    model = cfg.model
    if model.ep_comm_backend == "deepep" and isinstance(model.ep, int) and model.ep <= 1:
        ctx.error(
            "model.ep_comm_backend",
            f'= "deepep" needs expert parallelism, but model.ep = {model.ep}',
            'set model.ep above 1 (or "auto"), or set model.ep_comm_backend = "torch"',
            related=("model.ep",),
        )


def mxfp8_only_with_torch_ep_backend(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """model.quantization type "mxfp8" needs model.ep_comm_backend "torch"."""
    model = cfg.model
    if isinstance(model.quantization, MXFP8Config) and model.ep_comm_backend != "torch":
        ctx.error(
            "model.quantization",
            f'of type "mxfp8" needs model.ep_comm_backend = "torch", '
            f"got {show(model.ep_comm_backend)}",
            'set model.ep_comm_backend = "torch", or use quantization type "fp8"',
            related=("model.ep_comm_backend",),
        )


MODEL_RULES = (
    resolve_duplicate_ac_targets,
    validate_selective_targets,
    trust_remote_code_only_with_hf,
    vlm_only_with_custom_impl,
    vlm_cp_requires_ulysses,
    validate_cp,
    resolve_ac_for_ac_offloading,
    selective_ac_only_with_custom_impl,
    cpu_offload_mutual_exclusion,
    flash_attention_4_only_with_custom_impl,
    quantization_only_with_custom_impl,
    validate_ep_comm_backend,
    mxfp8_only_with_torch_ep_backend,
)
