"""torchrun's launcher in the command's own process, shared by `sft`, `rl`'s trainer on one node
and the trainer nodes of an `rl` SLURM job: a failed worker is one line, not a traceback, and a
stop signal the workers honour (control.stop_signal, or SIGINT) ends the command with 0 once
they saved. A one-node launch listens on loopback only (loopback_rendezvous.py).

    launch_workers("sft", one_node_launch(2, "run"), ["-m", "pkg.worker", "cfg.json"], control)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence

from .loopback_rendezvous import LOOPBACK, loopback_rendezvous


def launch_workers(command: str, settings, worker: Sequence[str], control) -> int:
    """Run `python *worker` under torchrun's LaunchConfig `settings`; the exit code of the
    command. `control` is the config's [control] table (None: no stop signal is honoured)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    local = settings.max_nodes == 1
    try:
        with loopback_rendezvous() if local else contextlib.nullcontext():
            elastic_launch(settings, sys.executable)(*worker)
    except ChildFailedError as err:
        rank, failure = err.get_first_failure()
        sys.stderr.write(
            f"{command}: worker rank {rank} failed with exit code {failure.exitcode}; "
            "its own message is above\n"
        )
        return failure.exitcode if failure.exitcode > 0 else 1
    except SignalException as err:
        stops = {control.stop_signal, "SIGINT"} if control is not None else set()
        if err.sigval.name in stops:  # passed on to every worker: they saved after their step
            name = err.sigval.name
            sys.stderr.write(f"{command}: {name}: the workers stopped after their step\n")
            return 0
        sys.stderr.write(f"{command}: stopped by {err.sigval.name}\n")
        return 128 + int(err.sigval)
    return 0


def one_node_launch(processes: int, run_id: str):
    """torchrun's settings for `processes` workers on this node alone, on loopback."""
    from torch.distributed.launcher.api import LaunchConfig

    return LaunchConfig(
        min_nodes=1, max_nodes=1, nproc_per_node=processes, run_id=run_id,
        rdzv_backend="c10d", rdzv_endpoint=f"{LOOPBACK}:0", local_addr=LOOPBACK,
        rdzv_configs={"is_host": True}, max_restarts=0, monitor_interval=0.5,
    )  # fmt: skip
