"""Training with setup errors reported the way config errors are: what, where, how to fix."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..errors import SetupError, SetupErrors


def run_guarded(command: str, train: Callable[[object], int], config) -> int:
    """`train(config)`; a setup refusal is printed once (rank 0) and exits 1, no traceback."""
    try:
        return train(config)
    except (SetupError, SetupErrors) as err:
        if os.environ.get("RANK", "0") == "0":  # every rank refuses alike: say it once
            sys.stderr.write(f"{command}: cannot start\n{err.render()}\n")
        return 1
    except KeyboardInterrupt:
        return 130
