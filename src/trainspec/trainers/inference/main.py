"""The `inference` command: starts an inference server alone and supervises it until a stop
signal (the reference's standalone `inference`; `rl` starts the same server beside its
trainer and orchestrator).

    inference configs/inference/tiny.toml                 # serves until Ctrl-C or SIGTERM
    inference infer.toml --server.port 8001 --vllm.max-model-len 4096
    inference infer.toml --dry-run    # <output_dir>/inference-launch.json: what it would start
    inference infer.toml              # with [slurm]: submitted with sbatch (slurm_job.py)

The server is vLLM (serving/vllm_plan.py: the same command `rl` runs) where this machine runs
it, else the in-process model server (engines.py says which, and why). It listens on
server.port at 127.0.0.1 unless server.host says otherwise; once it answers, stdout has one
line, `inference: ready at <base URL>` (what a script waits for). On SIGTERM or SIGINT the server is
stopped (vLLM's whole process group: TERM, then KILL after a bounded wait) and `inference`
exits 0; a server that exits by itself is reported with the end of its log (exit 1).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trainspec.cli.entrypoint import run_entrypoint

from ..errors import SetupError, SetupErrors, raise_all
from ..process.signals import SignalFlag
from ..run.atomic_files import write_atomic
from ..serving.inference_server import InferenceServer
from .engines import bind_host, client_url, engine_of, local_refusals, vllm_plan

POLL_S = 0.2
READY_S = 3600.0  # how long vLLM may take to load a model before `inference` gives up


def say(message: str) -> None:
    sys.stderr.write(f"inference: {message}\n")
    sys.stderr.flush()


def serve_vllm(plan, stop: SignalFlag) -> int:
    for note in plan.notes:
        say(note)
    say(f"starting vLLM: {plan.log_path}")
    server = InferenceServer(plan).start()
    try:
        if not server.wait_ready(READY_S, stop):
            say("stopped while vLLM was starting; it is stopped too")
            return 0
        say(f"vLLM serves {plan.served_name!r} at {plan.base_url}; Ctrl-C or SIGTERM stops it")
        print(f"inference: ready at {plan.base_url}", flush=True)
        while not stop():
            code = server.poll()
            if code is not None:
                say(
                    f"the vLLM server exited with code {code}; the end of {plan.log_path}:\n"
                    f"{server.log_tail()}"
                )
                return 1
            time.sleep(POLL_S)
        say("stopping the vLLM server")
        return 0
    finally:
        server.stop()


def serve_local(config, why: str, stop: SignalFlag) -> int:
    from ..orchestrator.sampling.local_model import local_model
    from ..orchestrator.sampling.model_server import ModelServer

    name, host, port = config.vllm.model, bind_host(config), config.server.port
    sampler = local_model(name, "vllm.model")
    try:
        server = ModelServer(sampler, name, host, port).start()
    except OSError as exc:
        raise SetupError(
            "server.port",
            f"= {port}: cannot listen on {host}:{port} ({exc.strerror or exc})",
            "choose a free port (--server.port), or stop what listens there",
        ) from None
    try:
        say(f"{why}: the model is served in this process (one request at a time)")
        say(f"serving {name!r} at {server.base_url}; Ctrl-C or SIGTERM stops it")
        print(f"inference: ready at {server.base_url}", flush=True)
        while not stop():
            time.sleep(POLL_S)
        say("stopping the server")
        return 0
    finally:
        server.close()


def launch(config) -> int:
    if config.slurm is not None:  # submitted to SLURM instead (slurm_job.py)
        from .slurm_job import submit_inference

        return submit_inference(config)
    run_dir = Path(config.output_dir)
    stop = SignalFlag((signal.SIGTERM, signal.SIGINT))
    try:
        engine, why = engine_of(config)
        plan = None
        if engine == "vllm":
            from ..serving.gpus import has_gpu

            plan = vllm_plan(config, run_dir, on_gpu=has_gpu())
        else:
            assert why is not None
            raise_all(local_refusals(config, why))
        if config.dry_run:
            return dry_run(config, run_dir, plan, why)
        stop.install()
        if plan is not None:
            return serve_vllm(plan, stop)
        assert why is not None
        return serve_local(config, why, stop)
    except (SetupError, SetupErrors) as err:
        sys.stderr.write(f"inference: cannot start\n{err.render()}\n")
        return 1
    finally:
        stop.restore()


def dry_run(config, run_dir: Path, plan, why: str | None) -> int:
    """Write what `inference` would start (inference-launch.json in output_dir), start nothing."""
    if plan is not None:
        launch_plan = {
            "engine": "vllm",
            "command": plan.argv,
            "env": plan.env,
            "log": str(plan.log_path),
            "base_url": plan.base_url,
        }
    else:
        launch_plan = {
            "engine": "model_server",
            "model": config.vllm.model,
            "host": bind_host(config),
            "port": config.server.port,
            "base_url": client_url(config),
            "why": why,
        }
    path = run_dir / "inference-launch.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(launch_plan, indent=2) + "\n", private=True)
    say(f"dry run: wrote {path}; started nothing")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    return run_entrypoint("inference", "inference", args, sys.stdout, sys.stderr, launch)


if __name__ == "__main__":
    sys.exit(main())
