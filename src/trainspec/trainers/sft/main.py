"""The `sft` command: parse and validate the config, then train here or under torchrun.

    sft configs/sft/demo.toml                      # the built-in demo (what `make run` does)
    sft configs/sft/demo.toml --max-steps 20 --optim.lr 3e-3
    sft @ configs/sft/demo.toml                    # the reference's way of naming a file
    sft configs/sft/demo.toml --deployment.num-train-gpus 2   # two processes through torchrun
    sft run.toml                          # with [slurm]: submitted with sbatch (--dry-run: written)

One process trains in this process. More than one (deployment.num_train_gpus on one node, or
num_train_nodes x gpus_per_node) re-launches through torchrun, each worker reading the resolved
config from the run directory. Multi-node: run the same command on every node with
MASTER_ADDR / MASTER_PORT naming node 0 and NODE_RANK set; torchrun's c10d rendezvous joins them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.config import dump_json

from ..process.malloc import tune_malloc
from ..run.atomic_files import write_atomic
from .deployment import processes, reserved_for_inference

# What makes CPU training fast on a shared machine, set before torch loads (env_vars win).
CPU_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def apply_env(env_vars) -> None:
    for key, value in CPU_DEFAULTS.items():
        os.environ.setdefault(key, value)
    os.environ.update(env_vars)


def launch_config(config):
    """torchrun's settings: one node stands alone, on loopback; several meet at MASTER_ADDR
    (c10d)."""
    from torch.distributed.launcher.api import LaunchConfig

    from ..process.workers import one_node_launch

    nodes, per_node = processes(config.deployment)
    if nodes == 1:
        return one_node_launch(per_node, config.run.name)
    endpoint = f"{os.environ['MASTER_ADDR']}:{os.environ.get('MASTER_PORT', '29500')}"
    return LaunchConfig(
        min_nodes=nodes,
        max_nodes=nodes,
        nproc_per_node=per_node,
        run_id=config.run.name,
        rdzv_backend="c10d",
        rdzv_endpoint=endpoint,
        rdzv_configs={"is_host": os.environ.get("NODE_RANK", "0") == "0"},
        max_restarts=0,
        monitor_interval=0.5,
    )


def run_workers(config, config_path: Path) -> int:
    """torchrun's launcher, in this process, its workers training on `config_path`."""
    from ..process.workers import launch_workers

    worker = ("-m", "trainspec.trainers.sft.worker", str(config_path))
    return launch_workers("sft", launch_config(config), worker, config.control)


def launch(config) -> int:
    """Train in this process, or spawn torchrun when several processes are asked for; with
    [slurm], submit the run to SLURM instead (trainers/slurm/); with [eval] + [inference] on a
    GPU machine, start the evals' server first (eval_server.py)."""
    if config.slurm is not None:
        from .slurm_job import submit_sft

        return submit_sft(config)
    apply_env(config.env_vars)
    tune_malloc()
    nodes, per_node = processes(config.deployment)
    note = reserved_for_inference(config)
    if note and "LOCAL_RANK" not in os.environ:
        sys.stderr.write(f"sft: {note}\n")
    if "LOCAL_RANK" in os.environ:  # a torchrun worker
        return train_guarded(config)
    from .eval_server import serves

    served = serves(config)
    if nodes * per_node == 1 and not served:
        return train_guarded(config)
    if nodes > 1 and "MASTER_ADDR" not in os.environ:
        sys.stderr.write(
            "sft: error: deployment.num_train_nodes > 1 needs MASTER_ADDR (and MASTER_PORT) "
            "naming node 0, and NODE_RANK on each node\n"
        )
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread per process beats sharing on CPU
    import torch

    from ..errors import SetupError, SetupErrors
    from ..run.lock import INHERITED, lock_run_dir
    from .online_evals import SERVER_ENV
    from .refusals import check_sft

    if served:  # the evals run on the server started below: judge the config as they will
        os.environ[SERVER_ENV] = config.eval.client.base_url
    try:
        check_sft(config, nodes * per_node, "cuda" if torch.cuda.is_available() else "cpu")
    except (SetupError, SetupErrors) as err:
        sys.stderr.write(f"sft: cannot start\n{err.render()}\n")
        return 1
    run_dir = Path(config.output_dir) / config.run.dir
    # One node's launcher holds the lock for its workers. Several nodes' workers take their
    # global ranks in the rendezvous (not by NODE_RANK), so rank 0, wherever it runs, claims it.
    if nodes == 1:
        try:  # held for the workers until they end; rank 0 finds it held (lock.INHERITED)
            lock_run_dir(run_dir, "sft", setting="run.name")
        except SetupError as err:
            sys.stderr.write(f"sft: cannot start\n{err.render()}\n")
            return 1
        os.environ[INHERITED] = str(run_dir.resolve())
    if not served:
        return run_workers(config, write_launch_config(config, run_dir))
    return train_served(config, run_dir, nodes * per_node)


def write_launch_config(config, run_dir: Path) -> Path:
    """The resolved config the torchrun workers read."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config_path = run_dir / "launch-config.json"
    write_atomic(config_path, dump_json(config) + "\n", private=True)
    return config_path


def train_served(config, run_dir: Path, count: int) -> int:
    """Start the evals' server, train (here when the trainer shares the server's GPUs, else
    under torchrun on the GPUs after them), stop the server."""
    from ..errors import SetupError, SetupErrors
    from .eval_server import start_eval_server, trainer_devices
    from .online_evals import SERVER_ENV

    try:
        server = start_eval_server(config, run_dir)
    except (SetupError, SetupErrors) as err:
        sys.stderr.write(f"sft: cannot start\n{err.render()}\n")
        return 1
    try:
        devices = trainer_devices(config)
        if count == 1 and devices is None:  # sharing the server's GPUs: train here
            return train_guarded(config)
        if devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = devices  # the workers' GPUs, after the server's
        return run_workers(config, write_launch_config(config, run_dir))
    finally:
        if server is not None:
            server.stop()
        os.environ.pop(SERVER_ENV, None)  # the server is gone


def train_guarded(config) -> int:
    """The SFT loop in this process, its setup refusals printed without a traceback."""
    from ..process.guard import run_guarded
    from .train import train

    return run_guarded("sft", train, config)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    return run_entrypoint("sft", "sft", args, sys.stdout, sys.stderr, launch)


if __name__ == "__main__":
    sys.exit(main())
