"""The plan of the vLLM server `[inference]` asks for: its command, environment, GPUs and
address, and the config that samples from it. Nothing is started here (inference_server.py
starts the plan).

    plan = vllm_plan(config, run_dir)  # `rl`'s server; SetupErrors for what it cannot start
    plan = server_plan(config.inference, model=name, served_name=name, infer_gpus=1,
                       run_dir=run_dir, command="sft")  # the server of `sft`'s online evals
    config = served(config, plan)      # the orchestrator's sampler pointed at it

One engine on the first `deployment.num_infer_gpus` GPUs (`CUDA_VISIBLE_DEVICES`; the trainer
gets the next ones, gpus.py), `vllm serve <model.name>` on `server.port` with the
`[inference.vllm]` engine settings as flags (other keys in that table pass through as
`--key value`), log-probs of the processed (temperature-scaled) distribution, and trainspec's
worker extension (trainers/serving/vllm_worker.py): after each broadcast the orchestrator POSTs
`{"method": "update_weights_from_path", "args": [<weights dir>]}` to vLLM's `/collective_rpc`
(dev mode, switched on here) and the engine loads the weights in place, then resets its prefix
cache. The orchestrator's sampler is pointed at the server (`sampler.type = "openai"`).

It listens on 127.0.0.1 unless `inference.server.host` says otherwise (dev mode lets whoever
reaches the port call any worker method); a multi-node SLURM job binds the inference node's own
address instead, which the orchestrator on another node connects to (rl_run/slurm_job.py).
The server's output goes to `<run dir>/logs/inference.log`. What this build does not start (a
router in front of several engines, KV-cache offload, disaggregated prefill/decode, several
nodes, LoRA adapters, routed-expert replay) is refused naming the field.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SetupError, raise_all
from .gpus import engine_gpus

LOOPBACK = "127.0.0.1"
WORKER_EXTENSION = "trainspec.trainers.serving.vllm_worker.WeightUpdate"
RELOAD_PATH = "/collective_rpc"

# [inference.vllm] keys and their `vllm serve` flags (booleans: the flag alone when true).
FLAGS = {
    "dtype": "--dtype",
    "max_model_len": "--max-model-len",
    "chat_template": "--chat-template",
    "tensor_parallel_size": "--tensor-parallel-size",
    "data_parallel_size": "--data-parallel-size",
    "data_parallel_size_local": "--data-parallel-size-local",
    "data_parallel_rpc_port": "--data-parallel-rpc-port",
    "api_server_count": "--api-server-count",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "all2all_backend": "--all2all-backend",
    "enforce_eager": "--enforce-eager",
    "trust_remote_code": "--trust-remote-code",
    "rope_scaling": "--rope-scaling",
    "seed": "--seed",
    "quantization": "--quantization",
    "enable_expert_parallel": "--enable-expert-parallel",
    "enable_eplb": "--enable-eplb",
    "enable_dbo": "--enable-dbo",
}
# The parsers act on chat completions; the orchestrator asks for plain completions.
PARSERS = ("tool_call_parser", "reasoning_parser")
NOT_STARTED = {
    "enable_lora": "the orchestrator samples the trainer's merged weights, not a served adapter",
    "max_lora_rank": "the orchestrator samples the trainer's merged weights, not a served adapter",
    "max_loras": "the orchestrator samples the trainer's merged weights, not a served adapter",
    "max_cpu_loras": "the orchestrator samples the trainer's merged weights, not a served adapter",
    "lora_target_modules": "the orchestrator samples the trainer's merged weights, not a served "
    "adapter",
    "enable_return_routed_experts": "replaying routed experts needs the trainer's router replay, "
    "which this build refuses",
}


@dataclass
class InferencePlan:
    argv: list[str]
    env: dict[str, str]  # added to the environment `rl` runs in
    base_url: str  # what the orchestrator's sampler talks to
    served_name: str
    log_path: Path
    notes: list[str] = field(default_factory=list)  # said at start
    timeout_field: str = "orchestrator.model.client.wait_for_ready_timeout"  # the wait's setting


def vllm_binary() -> str:
    """`vllm` on PATH, else the one beside this Python (its virtual environment's)."""
    found = shutil.which("vllm")
    if found:
        return found
    beside = Path(sys.executable).parent / "vllm"
    return str(beside) if beside.is_file() else "vllm"


def _flag_value(value) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def _engine_flags(vllm, errors: list[SetupError]) -> list[str]:
    defaults = type(vllm)()
    flags: list[str] = []
    for key, flag in FLAGS.items():
        value = getattr(vllm, key)
        if value is None or value is False or (value == getattr(defaults, key) and key != "seed"):
            continue
        flags += [flag] if value is True else [flag, _flag_value(value)]
    for key in PARSERS:
        value = getattr(vllm, key)
        if value not in (None, "auto"):
            flags += [f"--{key.replace('_', '-')}", str(value)]
    if vllm.enable_prefix_caching is not None:
        flags.append("--enable-prefix-caching" if vllm.enable_prefix_caching else
                     "--no-enable-prefix-caching")  # fmt: skip
    for key, why in NOT_STARTED.items():
        if getattr(vllm, key) != getattr(defaults, key):
            errors.append(SetupError(f"inference.vllm.{key}", f"is set: {why}", "drop it"))
    for key, value in (vllm.model_extra or {}).items():  # passed through, as the reference does
        if value is True:
            flags.append(f"--{key.replace('_', '-')}")
        elif value is not False and value is not None:
            flags += [f"--{key.replace('_', '-')}", _flag_value(value)]
    return flags


def vllm_plan(config, run_dir: Path) -> InferencePlan:
    """The command, environment and address of the server `rl`'s `[inference]` asks for."""
    return server_plan(
        config.inference,
        model=config.trainer.model.name,
        served_name=config.orchestrator.model.name,
        infer_gpus=engine_gpus(config.deployment),
        run_dir=run_dir,
        command="rl",
    )


def server_plan(
    inference, *, model: str, served_name: str, infer_gpus: int, run_dir: Path, command: str
) -> InferencePlan:
    """The command, environment and address of the server an `[inference]` table asks for:
    `model` loaded on the first `infer_gpus` GPUs, served as `served_name`, for `command`
    ("rl", "sft")."""
    vllm = inference.vllm
    errors: list[SetupError] = []
    notes: list[str] = []
    if "model" in vllm.model_fields_set and vllm.model != model:
        errors.append(
            SetupError(
                "inference.vllm.model",
                f"= {vllm.model!r}, but the policy is model.name = {model!r}; the server "
                "samples the policy and takes its new weights after every step",
                f"drop inference.vllm.model ({command} serves model.name)",
            )
        )
    if inference.deployment.type != "single_node":
        errors.append(
            SetupError(
                "inference.deployment.type",
                f"= {inference.deployment.type!r}: this build starts one engine on one node",
                'use inference.deployment.type = "single_node"',
            )
        )
    if inference.router is not None and vllm.data_parallel_size > 1:
        errors.append(
            SetupError(
                "inference.router",
                f"spreads requests over data_parallel_size = {vllm.data_parallel_size} engines "
                "with a router, which this build does not start",
                'set inference.router = "None" (vLLM\'s own data parallelism behind one port), '
                "or data_parallel_size = 1",
            )
        )
    elif inference.router is not None:
        notes.append("one engine: no router in front of it, the engine listens on server.port")
    for key, why in (
        ("kv_cache_offload", "offloading the KV cache to CPU or disk is not wired"),
        ("use_pd_kv_transfer", "disaggregated prefill/decode is not started by this build"),
    ):
        if getattr(inference, key):
            errors.append(SetupError(f"inference.{key}", f"is set: {why}", "drop it"))
    if inference.weight_broadcast.type != "filesystem":
        errors.append(
            SetupError(
                "inference.weight_broadcast.type",
                f"= {inference.weight_broadcast.type!r}: the server loads weight files",
                'use weight_broadcast.type = "filesystem"',
            )
        )
    if inference.enable_fp32_lm_head or inference.enable_fp32_router_logits:
        notes.append(
            "vLLM computes the output layer and router logits in the model's dtype (the "
            "reference's float32 patch of vLLM is not applied)"
        )
    flags = _engine_flags(vllm, errors)
    raise_all(errors)
    host = inference.server.host
    bind = host or LOOPBACK  # not every interface: dev mode runs any worker method it is asked
    port = inference.server.port
    argv = [
        vllm_binary(), "serve", model,
        "--served-model-name", served_name,
        "--host", bind,
        "--port", str(port),
        "--logprobs-mode", "processed_logprobs",
        "--worker-extension-cls", WORKER_EXTENSION,
        *flags,
    ]  # fmt: skip
    env = {
        "VLLM_SERVER_DEV_MODE": "1",  # /collective_rpc, the weight-update route
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "VLLM_LOGGING_LEVEL": inference.log.level.upper(),
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(infer_gpus))),
        **({"VLLM_USE_DEEP_GEMM": "1", "VLLM_MOE_USE_DEEP_GEMM": "1"}
           if inference.use_deep_gemm else {}),
        **dict(inference.env_vars),
    }  # fmt: skip
    client_host = bind if bind not in ("0.0.0.0", "::") else LOOPBACK
    return InferencePlan(
        argv, env, f"http://{client_host}:{port}/v1", served_name,
        run_dir / "logs" / "inference.log", notes,
    )  # fmt: skip


def served(config, plan: InferencePlan):
    """The config with the orchestrator sampling from the server `rl` starts, and the trainer
    on the GPUs after the server's."""
    sampler = config.orchestrator.sampler
    if sampler.type != "local":
        raise SetupError(
            "orchestrator.sampler.type",
            f"= {sampler.type!r}: with [inference] rl starts the server the orchestrator "
            "samples from",
            "drop [orchestrator.sampler], or drop [inference] to use your own server",
        )
    from trainspec.generated.orchestrator import OpenAISamplerConfig

    openai = OpenAISamplerConfig(
        type="openai", base_url=plan.base_url, model=plan.served_name, reload_path=RELOAD_PATH
    )
    orchestrator = config.orchestrator.model_copy(update={"sampler": openai})
    return config.model_copy(update={"orchestrator": orchestrator})
