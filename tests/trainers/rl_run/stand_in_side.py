"""A stand-in for one side of an `rl` run, for what the real sides cannot be made to do on
demand: hang in a step and ignore SIGTERM, or end early with exit code 0. The tests start `rl`
with its CHILD (rl_run/main.py: what it runs as `CHILD trainer PATH` and `CHILD orchestrator
PATH`; `CHILD trainer PATH N` when deployment.num_train_gpus = N > 1, which is torchrun's agent
here as in child.py, its workers this file again) set to this file.

Each process writes its pid to $STAND_IN_DIR/<side>-<pid>, then does what $STAND_IN_<SIDE>
says:

* "hang": ignores SIGTERM and sleeps (a step that never finishes; rl must kill it);
* "polite": sleeps until SIGTERM, then exits 0 (a trainer that saves and stops);
* "early": once $STAND_IN_WORKERS trainer processes (default 1) have written their pids,
  exits 0 (an orchestrator that ends early);
* "fail": the same, then exits 1.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    side = sys.argv[1]
    if side == "trainer" and sys.argv[3:] and "LOCAL_RANK" not in os.environ:
        # `CHILD trainer PATH N`: torchrun's agent, as child.py runs it, its N workers this file
        from trainspec.trainers.process.workers import launch_workers, one_node_launch

        worker = [__file__, "trainer", sys.argv[2]]
        return launch_workers("rl-trainer", one_node_launch(int(sys.argv[3]), "x"), worker, None)
    here = Path(os.environ["STAND_IN_DIR"])
    (here / f"{side}-{os.getpid()}").write_text("")
    mode = os.environ[f"STAND_IN_{side.upper()}"]
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "polite":
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    if mode in ("early", "fail"):
        workers, deadline = int(os.environ.get("STAND_IN_WORKERS", "1")), time.monotonic() + 300
        while len(list(here.glob("trainer-*"))) < workers and time.monotonic() < deadline:
            time.sleep(0.1)
        return 0 if mode == "early" else 1
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
