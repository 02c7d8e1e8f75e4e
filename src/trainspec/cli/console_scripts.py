"""The console scripts of the short-lived commands (validate-config, migrate-config): the
process is set up for a fast start, the command runs, and the process ends without tearing the
interpreter down.

A check allocates little and ends within a second, so the cyclic garbage collector only costs
time (it runs dozens of times while pydantic builds the config classes); it is off for the life
of the process (each command's main() also leaves pydantic's plugins unscanned). When the
command has returned, its output is flushed and the process exits at once (`os._exit`): taking
apart pydantic's and the config classes' objects one by one at interpreter exit costs ~17 ms of
a ~135 ms check and does nothing a finished command needs (no thread is running, every file the
commands write is closed, and synced where it matters, before they return). Measured by
scripts/bench_validate.py.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable

from trainspec import closed_pipe


def validate_config() -> None:
    gc.disable()
    from .validate_config import main

    _run_and_exit(main)


def migrate_config() -> None:
    gc.disable()
    from .migrate_config import main

    _run_and_exit(main)


def _run_and_exit(main: Callable[[], None]) -> None:
    try:
        main()
        code = 0
    except SystemExit as done:  # what main() ends with, as Python would report it
        if isinstance(done.code, int) or done.code is None:
            code = done.code or 0
        else:
            sys.stderr.write(f"{done.code}\n")
            code = 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away after the command's last write
        closed_pipe.silence_stdout()
        code = code or closed_pipe.EXIT_CODE
    with contextlib.suppress(OSError):
        sys.stderr.flush()
    os._exit(code)
