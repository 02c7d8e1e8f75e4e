"""The `rl-trainer` command: the RL trainer alone, configured by the RL trainer schema.

    rl-trainer configs/rl/tiny.toml                    # fake data: no orchestrator needed
    rl-trainer trainer.toml --output-dir outputs/run1  # rollouts from a running orchestrator
    torchrun --nproc-per-node 2 -m trainspec.trainers.rl.main trainer.toml

One process trains here; under torchrun every worker runs this same command (`rl`, with
deployment.num_train_gpus > 1, runs torchrun's agent in its trainer process, on loopback:
rl_run/child.py, process/workers.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from trainspec.cli.entrypoint import run_entrypoint

from ..process.exit import exit_process
from ..process.guard import run_guarded
from ..process.malloc import tune_malloc


def launch(config) -> int:
    # No OMP_WAIT_POLICY=PASSIVE default here (sft sets it): beside a sampler that takes turns
    # with it, OpenMP's own brief spin before sleeping measured 1.6x faster steps on a CPU.
    os.environ.update(config.env_vars)
    tune_malloc()
    if "LOCAL_RANK" in os.environ:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    from .train import train

    return run_guarded("rl-trainer", train, config)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    return run_entrypoint("rl", "rl-trainer", args, sys.stdout, sys.stderr, launch)


if __name__ == "__main__":
    exit_process(main())
