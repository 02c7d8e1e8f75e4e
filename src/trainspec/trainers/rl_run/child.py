"""One side of an `rl` run, started by the launcher with the resolved sub-config it wrote:

    python -m trainspec.trainers.rl_run.child trainer      RUN_DIR/rl-trainer.json
    python -m trainspec.trainers.rl_run.child orchestrator RUN_DIR/rl-orchestrator.json

(the trainer side under torchrun when deployment.num_train_gpus > 1).
"""

from __future__ import annotations

import json
import sys

from trainspec.config import validate

from ..process.exit import exit_process


def main(argv: list[str]) -> int:
    side, path = argv
    with open(path) as handle:
        document = json.load(handle)
    if side == "trainer":
        from ..rl.main import launch as launch_trainer

        return launch_trainer(validate("rl", document).config)
    from ..orchestrator.main import launch as launch_orchestrator

    return launch_orchestrator(validate("orchestrator", document).config, progress=False)


if __name__ == "__main__":
    exit_process(main(sys.argv[1:]))
