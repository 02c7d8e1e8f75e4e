"""How a trainer process ends once its command has returned (torch-free: a refused config ends
here too, before torch is imported)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NoReturn


def exit_process(code: int) -> NoReturn:
    """Exit with `code`. A torchrun worker (WORLD_SIZE > 1) flushes what it printed and logged,
    then exits without the interpreter's teardown: tearing down gloo's C++ objects during
    Python's shutdown can abort a rank that finished cleanly ("terminate called without an
    active exception": 1 run in 8 of tests/trainers/ckpt_worker.py on 2 busy CPU cores). By
    then the world is closed, checkpoints are written and monitors are closed, so nothing is
    lost."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        sys.exit(code)
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
