"""Rules of the `inference` command's config (schema inference_run.json): the reference's
InferenceConfig validators, as rules of their own.

* validate_multi_node_requires_slurm: several nodes come from a SLURM allocation.
* validate_router_deployment: llm-d runs only across nodes; several nodes need a router.
* validate_llmd_no_routed_experts: llm-d's router does not return routed experts.
* auto_setup_backend_port: with a router, the engine's port defaults to server.port + 100.
* auto_setup_kv_cache_offload: offloading the KV cache needs prefix caching (on unless off).

Its [env_vars] are checked as a trainer's are, and its [slurm] values as every job's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import RuleContext, show
from .shared import reject_protected_env_vars, validate_env_var_names
from .slurm import SBATCH_WORDS, sbatch_option, unquotable

if TYPE_CHECKING:
    from trainspec.generated.inference_run import InferenceRunConfig

SEVERAL_NODES = ("multi_node", "disaggregated")


def multi_node_requires_slurm(cfg: InferenceRunConfig, ctx: RuleContext) -> None:
    """A multi_node or disaggregated deployment runs on a SLURM allocation: it needs [slurm]."""
    if cfg.deployment.type in SEVERAL_NODES and cfg.slurm is None:
        ctx.error(
            "deployment.type",
            f"= {show(cfg.deployment.type)} runs on the nodes of a SLURM allocation, and there "
            "is no [slurm] to submit it with",
            'add [slurm], or use deployment.type = "single_node"',
            related=("slurm",),
        )


def router_fits_deployment(cfg: InferenceRunConfig, ctx: RuleContext) -> None:
    """The llm-d router spreads requests across nodes (not on one); several nodes need a router."""
    router, kind = cfg.router, cfg.deployment.type
    if router is not None and router.type == "llm-d" and kind == "single_node":
        ctx.error(
            "router.type",
            '= "llm-d" routes between the engines of several nodes, and deployment.type is '
            '"single_node"',
            'use router.type = "vllm-router", or a multi_node or disaggregated deployment',
            related=("deployment.type",),
        )
    if router is None and kind in SEVERAL_NODES:
        ctx.error(
            "router",
            f'= "None": a {kind} deployment spreads requests over its nodes\' engines through '
            "a router",
            "drop router (a vllm-router by default), or set [router] type",
            related=("deployment.type",),
        )


def llmd_no_routed_experts(cfg: InferenceRunConfig, ctx: RuleContext) -> None:
    """vllm.enable_return_routed_experts cannot pass through the llm-d router."""
    llm_d = cfg.router is not None and cfg.router.type == "llm-d"
    if llm_d and cfg.vllm.enable_return_routed_experts:
        ctx.error(
            "vllm.enable_return_routed_experts",
            "= true: the llm-d router does not return the routed experts",
            'drop it, or use router.type = "vllm-router"',
            related=("router.type",),
        )


def resolve_backend_port(cfg: InferenceRunConfig, ctx: RuleContext) -> None:
    """With a router on server.port, the engine behind it listens on server.port + 100 unless
    backend_port is written."""
    if cfg.router is not None and "backend_port" not in cfg.model_fields_set:
        ctx.resolve(cfg, "backend_port", cfg.server.port + 100)


def resolve_kv_cache_offload(cfg: InferenceRunConfig, ctx: RuleContext) -> None:
    """kv_cache_offload needs vLLM's prefix caching: on when unset, refused when off."""
    if cfg.kv_cache_offload is None:
        return
    if cfg.vllm.enable_prefix_caching is False:
        ctx.error(
            "vllm.enable_prefix_caching",
            "= false, and kv_cache_offload offloads the prefix cache's blocks",
            "drop vllm.enable_prefix_caching, or drop kv_cache_offload",
            related=("kv_cache_offload",),
        )
    elif cfg.vllm.enable_prefix_caching is None:
        ctx.resolve(cfg.vllm, "enable_prefix_caching", True)


def slurm_values_are_words(cfg: InferenceRunConfig, ctx: RuleContext) -> None:
    """With [slurm], each value on the job script's #SBATCH lines is one word, unquoted (and so
    is output_dir, in the job log's path on #SBATCH --output=)."""
    if cfg.slurm is None:
        return
    values = [(f"slurm.{key}", getattr(cfg.slurm, key)) for key in SBATCH_WORDS]
    values.append(("output_dir", cfg.output_dir))
    for path, value in values:
        what = None if value is None else unquotable(value)
        if what is not None:
            ctx.error(
                path,
                f"= {show(value)} holds {what}: it goes on the job script's "
                f"`{sbatch_option(path.rsplit('.', 1)[-1])}` line, which cannot be quoted",
                "give it as one word, without spaces, quotes or control characters",
            )


INFERENCE_RULES = (
    reject_protected_env_vars,
    validate_env_var_names,
    multi_node_requires_slurm,
    router_fits_deployment,
    llmd_no_routed_experts,
    resolve_backend_port,
    resolve_kv_cache_offload,
    slurm_values_are_words,
)
