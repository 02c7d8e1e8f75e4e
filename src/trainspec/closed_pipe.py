"""A reader that went away (`trainspec-command | head`): what the commands do about it."""

from __future__ import annotations

import os

EXIT_CODE = 128 + 13  # what a shell reports for a process ended by SIGPIPE


def silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
