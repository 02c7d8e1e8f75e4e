"""The inference server `sft` starts for its online evals: `[inference]` on a GPU machine, or
on CPU with vLLM's CPU build installed.

    server = start_eval_server(config, run_dir)   # None: no [eval] + [inference], no vLLM
    ...train, its rank 0 evaluating through the server (online_evals.Served)...
    server.stop()

The server is the one `rl` starts (serving/vllm_plan.py, serving/inference_server.py): vLLM's
OpenAI-compatible server on <model.name>, on the first `deployment.num_infer_gpus` GPUs, on
`inference.server.port`, with the `[inference.vllm]` settings as flags; each eval step's weights
are reloaded through vLLM's own routes (orchestrator/sampling/vllm_reload.py).
`sft` waits for it (`eval.client.wait_for_ready_timeout`), checks that it serves model.name
(unless `eval.client.skip_model_check`), and tells the trainer where it is
(online_evals.SERVER_ENV, eval.client.base_url); the trainer takes the GPUs after the server's,
or shares them on a machine with fewer. The server's output goes to
`<run dir>/logs/inference.log`; it is stopped when training ends, however it ends.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from ..builtin import is_builtin
from ..errors import SetupError
from ..process.signals import SignalFlag
from ..serving.gpus import has_gpu, trainer_gpus, visible_gpus
from ..serving.inference_server import InferenceServer
from ..serving.vllm_plan import server_plan, vllm_installed
from .online_evals import SERVER_ENV


def serves(config) -> bool:
    """Whether `sft` starts [inference]'s server: online evals with [inference], on a GPU or
    with vLLM's CPU build installed, for a model with weight files (not the built-in one, whose
    weights the trainer initialises)."""
    if config.eval is None or config.inference is None or is_builtin(config.model.name):
        return False
    return has_gpu() or vllm_installed()


def trainer_devices(config) -> str | None:
    """The trainer's CUDA_VISIBLE_DEVICES, after the server's GPUs; None when it shares them
    (or there is no GPU)."""
    return trainer_gpus(config.deployment, visible_gpus(), "sft") if has_gpu() else None


def _check_model(server: InferenceServer, config) -> None:
    """The server lists model.name under /v1/models (unless eval.client.skip_model_check)."""
    import httpx

    if config.eval.client.skip_model_check:
        return
    url = config.eval.client.base_url.rstrip("/") + "/models"
    try:
        served = [m.get("id") for m in httpx.get(url, timeout=30).json().get("data", [])]
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise SetupError(
            "eval.client.base_url",
            f"{url} cannot be read: {exc}",
            "point eval.client.base_url at the server's /v1 root",
        ) from None
    if config.model.name not in served:
        raise SetupError(
            "eval.client.base_url",
            f"the server at {url} serves {served}, not model.name = {config.model.name!r}",
            "check inference.server.port (another server may hold it), or set "
            "eval.client.skip_model_check = true",
        )


def start_eval_server(config, run_dir: Path) -> InferenceServer | None:
    """Start, wait for and check [inference]'s server, or None when sft starts none; a server
    that fails to come up, or a SIGTERM or Ctrl-C while it does, stops it (SetupError)."""
    if not serves(config):
        return None
    plan = server_plan(
        config.inference,
        model=config.model.name,
        served_name=config.model.name,
        infer_gpus=config.deployment.num_infer_gpus,
        run_dir=run_dir,
        command="sft",
        seq_len=config.model.seq_len,
        on_gpu=has_gpu(),
    )
    plan.base_url = config.eval.client.base_url  # the rules derive it from inference.server
    plan.timeout_field = "eval.client.wait_for_ready_timeout"
    for note in plan.notes:
        sys.stderr.write(f"sft: [inference]: {note}\n")
    gpus = plan.env.get("CUDA_VISIBLE_DEVICES")
    where = f"on GPU(s) {gpus}" if gpus is not None else "(its CPU build)"
    sys.stderr.write(f"sft: starting vLLM {where} for the online evals: {plan.log_path}\n")
    stop = SignalFlag((signal.SIGTERM, signal.SIGINT)).install()  # a stop while it comes up
    server = InferenceServer(plan)
    try:
        server.start()
        if not server.wait_ready(config.eval.client.wait_for_ready_timeout, stop):
            raise SetupError(
                "inference",
                "a stop signal came while the vLLM server was starting: it is stopped, and "
                "nothing was trained",
                "start sft again to train",
            )
        _check_model(server, config)
    except BaseException:
        server.stop()  # its whole process group, whatever ended the wait
        raise
    finally:
        stop.restore()
    sys.stderr.write(f"sft: vLLM serves {plan.served_name!r} at {plan.base_url}\n")
    os.environ[SERVER_ENV] = plan.base_url
    return server
