"""One side of an `rl` run, started by the launcher with the resolved sub-config it wrote:

    python -m trainspec.trainers.rl_run.child trainer      RUN_DIR/rl-trainer.json [PROCESSES]
    python -m trainspec.trainers.rl_run.child orchestrator RUN_DIR/rl-orchestrator.json

With PROCESSES > 1 (deployment.num_train_gpus) the trainer side is torchrun's agent, in this
process (process/workers.py, on loopback), and its workers run this same command.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from trainspec.config import validate

from ..process.exit import exit_process


def main(argv: list[str]) -> int:
    side, path, *more = argv
    processes = int(more[0]) if more else 1
    with open(path) as handle:
        document = json.load(handle)
    if side == "trainer":
        from ..rl.main import launch as launch_trainer

        config = validate("rl", document).config
        if processes > 1 and "LOCAL_RANK" not in os.environ:  # the agent; its workers train
            from ..process.workers import launch_workers, one_node_launch

            worker = ["-m", __spec__.name, "trainer", path]
            run_id = Path(config.output_dir).name
            return launch_workers("rl-trainer", one_node_launch(processes, run_id), worker,
                                  config.control)  # fmt: skip
        return launch_trainer(config)
    from ..orchestrator.main import launch as launch_orchestrator

    return launch_orchestrator(validate("orchestrator", document).config, progress=False)


if __name__ == "__main__":
    exit_process(main(sys.argv[1:]))
