"""Which server `inference` starts, and what it refuses before starting it.

    engine, why = engine_of(config)          # "vllm", None | "local", why not vLLM
    plan = vllm_plan(config, run_dir, on_gpu=...)   # vLLM's command (serving/vllm_plan.py)
    raise_all(local_refusals(config, why))   # settings only vLLM honours, when it is not vLLM

vLLM when this machine can run it (a GPU, or vLLM's CPU build installed) and the model has
weight files; else the in-process model server (orchestrator/sampling/model_server.py: the
OpenAI-compatible routes the orchestrator and verifiers call, one request at a time), which
serves `vllm.model`: a built-in model (its weights initialised from a seed, as the trainers
start them) or any Hugging Face weights. Both listen on server.port at 127.0.0.1 unless
server.host says otherwise.
"""

from __future__ import annotations

from pathlib import Path

from trainspec.generated.inference_run import InferenceRunConfig

from ..errors import SetupError, SetupErrors
from ..refusals import set_by_user
from ..serving.vllm_plan import LOOPBACK, InferencePlan, server_plan, why_not_vllm

DEFAULT_MAX_MODEL_LEN = 2048  # vLLM's CPU build: max_model_len when vllm.max_model_len is unset
# Settings the in-process server honours (the rest tune vLLM and are refused there).
LOCAL_SETTINGS = ("vllm.model", "server.host", "server.port", "log.level")


def engine_of(config, gpus: bool | None = None) -> tuple[str, str | None]:
    """("vllm", None) when vLLM serves the model here, else ("local", why it does not)."""
    why = why_not_vllm(config.vllm.model, gpus)
    return ("local", why) if why is not None else ("vllm", None)


def bind_host(config) -> str:
    """The address the server listens on: server.host, else loopback (never every interface
    unless asked: the server takes any request it is sent)."""
    return config.server.host or LOOPBACK


def client_url(config) -> str:
    host = bind_host(config)
    return f"http://{LOOPBACK if host in ('0.0.0.0', '::') else host}:{config.server.port}/v1"


def _unprefixed(err: SetupError) -> SetupError:
    """A refusal of serving/vllm_plan.py, which names rl's [inference] table, as this command's
    settings name it (at the top level)."""
    path = err.path.removeprefix("inference.") if err.path != "inference" else "vllm"
    fix = err.fix.replace("inference.", "").replace(", or drop [inference]", "")
    return SetupError(path, err.problem, fix)


def vllm_plan(config, run_dir: Path, *, on_gpu: bool) -> InferencePlan:
    """vLLM's command, environment and address for this config (SetupErrors naming the
    settings it cannot honour)."""
    vllm = config.vllm
    try:
        plan = server_plan(
            config,
            model=vllm.model,
            served_name=vllm.model,
            infer_gpus=vllm.tensor_parallel_size * vllm.data_parallel_size,
            run_dir=run_dir,
            command="inference",
            seq_len=vllm.max_model_len or DEFAULT_MAX_MODEL_LEN,
            on_gpu=on_gpu,
        )
    except SetupError as err:
        raise _unprefixed(err) from None
    except SetupErrors as errs:
        raise SetupErrors([_unprefixed(err) for err in errs.errors]) from None
    plan.timeout_field = "vllm.model"
    return plan


def local_refusals(config, why: str) -> list[SetupError]:
    """The settings that tune vLLM, refused when the in-process server runs instead."""
    resolved = {}  # what the rules derived, not the user (backend_port: server.port + 100)
    if "backend_port" not in config.model_fields_set:
        resolved["backend_port"] = config.backend_port
    baseline = InferenceRunConfig.model_validate(
        {
            **resolved,
            "vllm": {"model": config.vllm.model},
            "server": {"host": config.server.host, "port": config.server.port},
            "log": {"level": config.log.level},
            "output_dir": config.output_dir,
            "slurm": config.slurm,
            "dry_run": config.dry_run,
        }
    )
    written = [p for p in set_by_user(config, baseline) if p not in LOCAL_SETTINGS]
    if not written:
        return []
    return [
        SetupError(
            written[0] if len(written) == 1 else written[0].split(".")[0],
            f"sets {', '.join(written)}, which tune the vLLM server; {why}, so the model is "
            "served in this process (one request at a time)",
            "drop those settings, or name a model with weight files (vllm.model) on a machine "
            "with a GPU or vLLM installed",
        )
    ]
