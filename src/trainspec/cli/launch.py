"""The console scripts of the short-lived commands (validate-config, migrate-config): the
process is set up for a fast start, then the command is imported and run.

A check allocates little and ends within a second, so the cyclic garbage collector only costs
time (it runs dozens of times while pydantic builds the config classes); it is turned off for
the life of the process (each command's main() also leaves pydantic's plugins unscanned).
Measured by scripts/bench_validate.py.
"""

from __future__ import annotations

import gc


def _fast_start() -> None:
    gc.disable()


def validate_config() -> None:
    _fast_start()
    from .validate_config import main

    main()


def migrate_config() -> None:
    _fast_start()
    from .migrate_config import main

    main()
