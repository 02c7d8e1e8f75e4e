"""The `rl` command: one config (schema rl.json) starts the orchestrator and the RL trainer as two
processes that share output_dir, watches both, and stops both.

    rl configs/rl/demo.toml
    rl configs/rl/demo.toml --max-steps 50 --trainer.optim.lr 1e-4
    rl configs/rl/demo.toml --deployment.num-train-gpus 2      # the trainer under torchrun
    rl run.toml               # with [slurm]: submitted with sbatch (--dry-run: the script written)

It ends when the trainer has trained max_steps and the orchestrator has evaluated the final
weights. If either process fails, the other is stopped and `rl` says which one failed and how;
the trainer stops after its current step and saves a checkpoint (its [control] stop signal). A
SIGTERM or Ctrl-C to `rl` stops both the same way; a second Ctrl-C kills both at once, with
every process under them (supervise.py: how each wait is bounded). At the end run_dir/rl.png
shows reward and loss, beside the trainer's metrics.jsonl and the orchestrator's
orchestrator/metrics.jsonl.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.config import dump_json

from ..core.model_source import model_source
from ..errors import SetupError, SetupErrors, raise_all
from ..process.loopback_rendezvous import INTERFACE, SOCKET_VARIABLES
from ..process.signals import SignalFlag
from ..process.tree import Tree
from ..run.atomic_files import write_atomic
from ..run.lock import INHERITED, lock_run_dir
from ..serving.gpus import trainer_gpus, visible_gpus
from ..serving.inference_server import InferenceServer
from ..serving.vllm_plan import InferencePlan
from ..wire.broadcast import stale_dirs
from .inference_plan import served, vllm_plan
from .refusals import (
    check_launch,
    clean_refusals,
    has_gpu,
    nccl_gpu_refusals,
    say_inference,
    serves_inference,
)
from .summary import summarize
from .supervise import say, supervise

STARTED = time.monotonic()  # the command's start, for the summary's total time

CHILD = ("-m", "trainspec.trainers.rl_run.child")


def trainer_command(config, path: Path) -> list[str]:
    """The trainer side: one process, or (deployment.num_train_gpus > 1) torchrun's agent and
    its workers, started by the same command (child.py)."""
    processes = config.deployment.num_train_gpus
    return [sys.executable, *CHILD, "trainer", str(path), *([str(processes)] * (processes > 1))]


def trainer_devices(config) -> dict[str, str]:
    """The trainer's CUDA_VISIBLE_DEVICES beside the server: the GPUs after the server's, or
    the first num_train_gpus (shared with it) on a machine with too few."""
    devices = trainer_gpus(config.deployment, visible_gpus(), "rl")
    if devices is None:
        devices = ",".join(map(str, range(config.deployment.num_train_gpus)))
    return {"CUDA_VISIBLE_DEVICES": devices}


def launch(config) -> int:
    if config.slurm is not None:  # submitted to SLURM instead (trainers/slurm/)
        from .slurm_job import submit_rl

        return submit_rl(config)
    # the orchestrator's refusals import torch: a [slurm] job above submits without it
    from ..orchestrator.environments.players import check_env_tables
    from ..orchestrator.refusals import check_support

    run_dir = Path(config.trainer.output_dir)  # output_dir, or output_dir/run.dir
    try:  # the trainer's lock, held for it (lock.INHERITED); the orchestrator takes its own
        check_launch(config)
        check_support(config.orchestrator)  # the orchestrator's refusals, before either starts
        raise_all(clean_refusals(config, run_dir))
        model_source(config.trainer.model.name, "model.name")  # both sides would refuse it
        on_gpu = serves_inference(config) and has_gpu()
        if on_gpu:
            raise_all(nccl_gpu_refusals(config, visible_gpus()))
        plan = vllm_plan(config, run_dir, on_gpu=on_gpu) if serves_inference(config) else None
        if plan is not None:
            config = served(config, plan)
        if config.dry_run:
            return dry_run(config, run_dir, plan)
        raise_all(check_env_tables(config.orchestrator))  # each taskset's own settings
        lock_run_dir(run_dir, "rl", setting="output_dir")
    except (SetupError, SetupErrors) as err:
        sys.stderr.write(f"rl: cannot start\n{err.render()}\n")
        return 1
    say_inference(config)
    # From here on every exit stops what was started: the server (its whole process group)
    # and both sides, on a stop signal, an error, or the end of the run.
    stop = SignalFlag((signal.SIGTERM, signal.SIGINT)).install()  # passed on to both sides
    # one node: the sockets of every group its processes form (gloo, NCCL) on loopback,
    # unless the environment or env_vars name an interface
    for name in SOCKET_VARIABLES:
        if name not in config.env_vars:
            os.environ.setdefault(name, INTERFACE)
    server: InferenceServer | None = None
    children: list[Tree] = []
    try:
        if plan is not None:
            for note in plan.notes:
                say(f"[inference]: {note}")
            devices = plan.env.get("CUDA_VISIBLE_DEVICES")
            where = f"on GPU(s) {devices}" if on_gpu else "(its CPU build)"
            say(f"starting vLLM {where}: {plan.log_path}")
            try:
                server = InferenceServer(plan).start()
                timeout = config.orchestrator.model.client.wait_for_ready_timeout
                if not server.wait_ready(timeout, stop):
                    say("stopped while vLLM was starting; it is stopped too")
                    return 1
            except SetupError as err:
                sys.stderr.write(f"rl: cannot start\n{err.render()}\n")
                return 1
            say(f"vLLM serves {plan.served_name!r} at {plan.base_url}")
        os.environ.update(config.env_vars)  # both children inherit them; their own win
        os.environ[INHERITED] = str(run_dir.resolve())
        if config.clean:  # batches and weights of an earlier run must not be taken for this one's
            for stale in stale_dirs(run_dir):
                shutil.rmtree(stale, ignore_errors=True)
        paths = write_configs(config, run_dir)
        orchestrator = subprocess.Popen(
            [sys.executable, *CHILD, "orchestrator", str(paths["orchestrator"])],
            start_new_session=True,
        )
        children.append(Tree(orchestrator))
        trainer = subprocess.Popen(
            trainer_command(config, paths["trainer"]),
            start_new_session=True,
            env={**os.environ, **(trainer_devices(config) if on_gpu else {})},
        )
        children.append(Tree(trainer))
        code = supervise(
            children[1], children[0], stop, server, max_steps=config.max_steps, run_dir=run_dir
        )
    except SetupError as err:  # after the server's start: said, and the finally stops it
        sys.stderr.write(f"rl: cannot start\n{err.render()}\n")
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C (process/signals.py): no more waiting
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # what follows is bounded: let it reap
        say("a second Ctrl-C: killing what rl started, and every process under it, now (the "
            "trainer saves no checkpoint; a relaunch resumes from its last one)")  # fmt: skip
        return 130
    finally:
        for side in children:  # what still runs, and every process seen under it (torchrun's
            side.kill()  # workers, in sessions of their own), killed; each side reaped
        if server is not None:
            server.stop()
        stop.restore()
    if code == 0:  # a failure was said above; its figures would read as a result
        took = time.monotonic() - STARTED
        print(summarize(run_dir, stopped=stop(), seconds=took), flush=True)
    return code


def write_configs(config, run_dir: Path) -> dict[str, Path]:
    """The resolved configs of both processes, as they start them: rl-trainer.json and
    rl-orchestrator.json in the run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for side in ("trainer", "orchestrator"):
        paths[side] = run_dir / f"rl-{side}.json"
        try:
            write_atomic(paths[side], dump_json(getattr(config, side)) + "\n", private=True)
        except OSError as exc:
            raise SetupError(
                "output_dir",
                f"cannot write {paths[side]}: {exc.strerror or exc}",
                "make room on the run directory's disk, or fix what is in the way there (its "
                "permissions, or a directory at that name), and run again",
            ) from None
    return paths


def dry_run(config, run_dir: Path, server: InferencePlan | None = None) -> int:
    """Write both configs and what `rl` would start (rl-launch.json: the commands and the
    environment it adds; with [inference] on a GPU the vLLM server's too), then stop."""
    say_inference(config)
    paths = write_configs(config, run_dir)
    plan = {
        "trainer": trainer_command(config, paths["trainer"]),
        "orchestrator": [sys.executable, *CHILD, "orchestrator", str(paths["orchestrator"])],
        "env": dict(config.env_vars),
        "clean": [str(path) for path in stale_dirs(run_dir)] if config.clean else [],
    }
    if server is not None:
        plan["inference"] = {
            "command": server.argv,
            "env": server.env,
            "log": str(server.log_path),
            "base_url": server.base_url,
        }
    write_atomic(run_dir / "rl-launch.json", json.dumps(plan, indent=2) + "\n", private=True)
    say(f"dry run: wrote {paths['trainer'].name}, {paths['orchestrator'].name} and rl-launch.json")
    say(f"in {run_dir}; started nothing")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    return run_entrypoint("rl_run", "rl", args, sys.stdout, sys.stderr, launch)


if __name__ == "__main__":
    sys.exit(main())
