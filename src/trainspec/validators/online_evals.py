"""Rules of the SFT trainer's online evals (`[eval]`, `[inference]`, `weight_broadcast`): the
reference's propagate_model_to_inference and auto_setup_online_eval, as rules of their own.

Where this build differs from the reference, on purpose:

* `weight_broadcast` defaults to "filesystem" whatever [inference] says (the reference picks
  "nccl" with [inference] and no LoRA): the server sft starts loads each eval step's weights
  from files, and an in-memory broadcast is refused at start. An explicit nccl or nixl is
  still judged by the reference's rules here.
* [eval] without [inference] is no warning: the evals then run in the trainer's process (the
  reference expects a server you started, and warns).
* LoRA does not switch on the server's adapters (enable_lora, max_lora_rank): the evals load
  the merged weights each checkpoint exports.
* No admin URL is derived from a router: sft starts one engine on server.port, no router.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from trainspec.generated.deployment import MultiNodeDeploymentConfig
from trainspec.generated.weight_broadcast import FileSystemWeightBroadcastConfig

from .context import RuleContext, show
from .orchestrator import (
    check_concurrency_bounds,
    check_env_keys,
    check_source_names,
    check_source_tasks,
)

if TYPE_CHECKING:
    from trainspec.generated.inference import InferenceConfig
    from trainspec.generated.sft_eval import EvalsEvalConfig
    from trainspec.generated.sft_trainer import SFTTrainerConfig

WILDCARD_HOSTS = (None, "", "0.0.0.0", "::")


def _evals(cfg: SFTTrainerConfig) -> EvalsEvalConfig | None:
    """cfg.eval with its type: a lazily loaded table reads as Any to a type checker
    (trainspec.config_model)."""
    return cfg.eval


def _inference(cfg: SFTTrainerConfig) -> InferenceConfig | None:
    """cfg.inference with its type (see _evals)."""
    return cfg.inference


def resolve_inference_model(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """inference.vllm.model, unless written, becomes model.name: the server loads the model the
    run trains (the reference's propagate_model_to_inference)."""
    inference = _inference(cfg)
    if inference is None or "model" in inference.vllm.model_fields_set:
        return
    ctx.resolve(inference.vllm, "model", cfg.model.name)


def validate_inference_needs_eval(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """[inference] needs [eval]: the server sft starts serves only the online evals."""
    if cfg.inference is not None and cfg.eval is None:
        ctx.error(
            "inference",
            "is set without [eval]: sft starts an inference server only to run the online evals",
            "add [eval] with at least one [[eval.source]], or drop [inference]",
        )


def resolve_eval_weight_broadcast(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """With [eval], weight_broadcast defaults to filesystem; "nixl" cannot feed the evals, and
    "nccl" can neither send LoRA weights nor re-send the resume step (eval.retrigger_on_resume).
    [inference]'s own weight_broadcast.type follows it."""
    evals = _evals(cfg)
    if evals is None:
        return
    if cfg.weight_broadcast is None:
        ctx.resolve(cfg, "weight_broadcast", FileSystemWeightBroadcastConfig())
    kind = cfg.weight_broadcast.type  # type: ignore[union-attr]  # set just above
    if kind == "nixl":
        ctx.error(
            "weight_broadcast.type",
            '= "nixl" cannot feed the online evals of an SFT run',
            'use weight_broadcast.type = "filesystem" (or drop [weight_broadcast])',
        )
    elif kind == "nccl" and cfg.model.lora is not None:
        ctx.error(
            "weight_broadcast.type",
            '= "nccl" cannot send LoRA weights to the evals\' server',
            'use weight_broadcast.type = "filesystem" with [model.lora]',
            related=("model.lora",),
        )
    if kind != "filesystem" and evals.retrigger_on_resume:
        ctx.error(
            "eval.retrigger_on_resume",
            f'= true needs weight_broadcast.type = "filesystem" (it is {kind!r}): the resume '
            "step is evaluated again from the weights written for it",
            'set weight_broadcast.type = "filesystem", or retrigger_on_resume = false',
            related=("weight_broadcast.type",),
        )
    inference = _inference(cfg)
    if inference is not None and inference.weight_broadcast.type != kind:
        if "type" in inference.weight_broadcast.model_fields_set:
            ctx.warn(
                "inference.weight_broadcast.type",
                f"set to {kind!r} (was {inference.weight_broadcast.type!r}): the server takes "
                "the weights the trainer sends (weight_broadcast.type)",
                "drop inference.weight_broadcast.type",
                related=("weight_broadcast.type",),
            )
        ctx.resolve(inference.weight_broadcast, "type", kind)


def server_url(inference) -> str:
    """The base URL of the server an [inference] table describes, as a client on this node
    reaches it."""
    host = inference.server.host
    host = "localhost" if host in WILDCARD_HOSTS else host
    return f"http://{host}:{inference.server.port}/v1"


def _port(url: str) -> int | None:
    try:
        parts = urlsplit(url)
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


def validate_eval_deployment(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """The deployment holds the evals' server: several nodes need [inference] with inference
    nodes and a router; on one node the trainer's and the server's GPUs fit the node, the
    server has at least one, in whole tensor-parallel groups; the server loads model.name, and
    an eval.client.base_url written by hand uses its port (inference.server.port)."""
    evals = _evals(cfg)
    if evals is None:
        return
    dep, inference = cfg.deployment, _inference(cfg)
    if isinstance(dep, MultiNodeDeploymentConfig):
        _multi_node(cfg, dep, ctx)
        return
    if inference is None:
        return
    used = dep.num_train_gpus + dep.num_infer_gpus
    if used > dep.gpus_per_node:
        ctx.error(
            "deployment.num_infer_gpus",
            f"num_train_gpus + num_infer_gpus = {used} exceeds deployment.gpus_per_node "
            f"= {dep.gpus_per_node}",
            "use fewer GPUs, or raise gpus_per_node",
            related=("deployment.num_train_gpus", "deployment.gpus_per_node"),
        )
    tp = inference.vllm.tensor_parallel_size
    if dep.num_infer_gpus < 1:
        ctx.error(
            "deployment.num_infer_gpus",
            "= 0 leaves no GPU for the inference server [inference] starts",
            "set deployment.num_infer_gpus = 1 (or more), or drop [inference] to evaluate in "
            "the trainer's process",
        )
    elif dep.num_infer_gpus % tp:
        ctx.error(
            "deployment.num_infer_gpus",
            f"= {dep.num_infer_gpus} is not a multiple of inference.vllm.tensor_parallel_size "
            f"= {tp}",
            f"give the server a multiple of {tp} GPUs",
            related=("inference.vllm.tensor_parallel_size",),
        )
    _same_model(cfg, ctx)
    client = evals.client
    if "base_url" in client.model_fields_set and _port(client.base_url) != inference.server.port:
        ctx.error(
            "eval.client.base_url",
            f"= {show(client.base_url)} is not on inference.server.port = "
            f"{inference.server.port}, where the server sft starts listens",
            "drop eval.client.base_url (it follows inference.server), or use that port",
            related=("inference.server.port",),
        )


def _same_model(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    vllm = _inference(cfg).vllm  # type: ignore[union-attr]  # called with [inference] only
    if vllm.model != cfg.model.name:
        ctx.error(
            "inference.vllm.model",
            f"= {show(vllm.model)}, but model.name = {show(cfg.model.name)}: the evals' server "
            "must load the model the run trains, to take its weights at each eval",
            "drop inference.vllm.model (it follows model.name)",
            related=("model.name",),
        )


def _multi_node(cfg: SFTTrainerConfig, dep: MultiNodeDeploymentConfig, ctx: RuleContext) -> None:
    inference = _inference(cfg)
    if inference is None:
        ctx.error(
            "deployment.type",
            '= "multi_node" with [eval] needs [inference]: the evals of a multi-node run play '
            "against inference servers on nodes of their own",
            "add [inference] and deployment.num_infer_nodes, or drop [eval]",
            related=("eval",),
        )
        return
    if dep.num_infer_nodes < 1:
        ctx.error(
            "deployment.num_infer_nodes",
            "= 0 leaves no node for the evals' inference servers",
            "set deployment.num_infer_nodes = 1 (or more)",
        )
    if inference.router is None:
        ctx.error(
            "inference.router",
            "is null: the inference servers on several nodes need a router in front of them",
            "drop inference.router (the vllm-router default), or set its type",
        )
    _same_model(cfg, ctx)
    tp = inference.vllm.tensor_parallel_size
    if dep.gpus_per_node % tp:
        ctx.error(
            "inference.vllm.tensor_parallel_size",
            f"= {tp} does not divide deployment.gpus_per_node = {dep.gpus_per_node}",
            "pick a tensor-parallel size that divides the GPUs of a node",
            related=("deployment.gpus_per_node",),
        )
    if cfg.max_steps is None:
        ctx.warn(
            "max_steps",
            "is not set: the evals' servers on their own nodes wait for weights until the "
            "trainer's last step, which max_steps tells them",
            "set max_steps",
        )


def resolve_eval_inference(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """The evals' server follows the deployment: one node's server runs num_infer_gpus /
    tensor_parallel_size data-parallel replicas, with at least that many API servers (unless
    LoRA); eval.client.base_url, unless written, is http://<host>:<server.port>/v1; an nccl
    broadcast reaches every inference GPU (inference_world_size)."""
    eval_cfg, inference, dep = _evals(cfg), _inference(cfg), cfg.deployment
    if eval_cfg is None or inference is None:
        return
    vllm = inference.vllm
    tp = vllm.tensor_parallel_size
    gpus = 0
    if isinstance(dep, MultiNodeDeploymentConfig):
        gpus = dep.num_infer_nodes * dep.gpus_per_node
    elif dep.num_infer_gpus >= 1 and not dep.num_infer_gpus % tp:
        dp = dep.num_infer_gpus // tp
        gpus = dp * tp
        if vllm.data_parallel_size != dp:
            if "data_parallel_size" in vllm.model_fields_set:
                ctx.warn(
                    "inference.vllm.data_parallel_size",
                    f"set to {dp} (was {vllm.data_parallel_size}): deployment.num_infer_gpus / "
                    f"tensor_parallel_size = {dep.num_infer_gpus} / {tp}",
                    "drop inference.vllm.data_parallel_size",
                    related=("deployment.num_infer_gpus",),
                )
            ctx.resolve(vllm, "data_parallel_size", dp)
        if cfg.model.lora is None and vllm.api_server_count < dp:
            ctx.resolve(vllm, "api_server_count", dp)
        if "base_url" not in eval_cfg.client.model_fields_set:
            ctx.resolve(eval_cfg.client, "base_url", server_url(inference))
    broadcast = cfg.weight_broadcast
    if broadcast is not None and broadcast.type == "nccl" and gpus:
        ctx.resolve(broadcast, "inference_world_size", gpus)


def validate_eval_sources(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """The eval sources have distinct names (not "agg"), each one task: an environment, or
    data with its reward functions, and no near miss of verifiers' own keys in their open env
    tables (the orchestrator's rules on its eval sources)."""
    evals = _evals(cfg)
    if evals is None:
        return
    check_source_names(ctx, "eval.source", list(evals.source))
    check_source_tasks(ctx, "eval.source", list(evals.source))
    check_env_keys(ctx, "eval.source", list(evals.source))


def validate_eval_concurrency(cfg: SFTTrainerConfig, ctx: RuleContext) -> None:
    """eval.concurrency.initial_inflight and min_inflight may not exceed its max_inflight."""
    evals = _evals(cfg)
    if evals is not None:
        check_concurrency_bounds(ctx, "eval.concurrency", evals.concurrency)


ONLINE_EVAL_RULES = (
    resolve_inference_model,
    validate_inference_needs_eval,
    resolve_eval_weight_broadcast,
    validate_eval_deployment,
    resolve_eval_inference,
    validate_eval_sources,
    validate_eval_concurrency,
)
