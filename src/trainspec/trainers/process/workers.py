"""torchrun's launcher in the command's own process, shared by `sft` and the trainer nodes of
an `rl` SLURM job: a failed worker is one line, not a traceback, and a stop signal the
workers honour (control.stop_signal, or SIGINT) ends the command with 0 once they saved."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def launch_workers(command: str, settings, worker: Sequence[str], control) -> int:
    """Run `python *worker` under torchrun's LaunchConfig `settings`; the exit code of the
    command. `control` is the config's [control] table (None: no stop signal is honoured)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    try:
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
