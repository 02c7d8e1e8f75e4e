"""Training with setup errors reported the way config errors are: what, where, how to fix."""

from __future__ import annotations

import os
import sys

from ..errors import SetupError, SetupErrors


def run_guarded(config) -> int:
    from .train import train

    try:
        return train(config)
    except (SetupError, SetupErrors) as err:
        if os.environ.get("RANK", "0") == "0":  # every rank refuses alike: say it once
            sys.stderr.write(f"sft: cannot start\n{err.render()}\n")
        return 1
    except KeyboardInterrupt:
        return 130
