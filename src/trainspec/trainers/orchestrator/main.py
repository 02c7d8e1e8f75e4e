"""The `orchestrator` command: samples, scores and ships rollouts to a running RL trainer.

    orchestrator configs/orchestrator/demo.toml
    orchestrator orch.toml --output-dir outputs/run1 --sampler.type openai \
        --sampler.base-url http://localhost:8000/v1

It shares `output_dir` with the trainer: weights arrive in output_dir/broadcasts, batches leave
through the rollout transport, and its own files (resolved config, metrics) go to
output_dir/orchestrator/.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence

from trainspec.cli.entrypoint import run_entrypoint

from ..process.guard import run_guarded
from ..process.malloc import tune_malloc


def launch(config, *, progress: bool = True) -> int:
    """Run the orchestrator; `progress` off under `rl`, whose trainer's bar has the console."""
    os.environ.update(config.env_vars)  # before the libraries that read them load
    tune_malloc()
    from .loop import run

    return run_guarded("orchestrator", functools.partial(run, progress=progress), config)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    return run_entrypoint("orchestrator", "orchestrator", args, sys.stdout, sys.stderr, launch)


if __name__ == "__main__":
    sys.exit(main())
