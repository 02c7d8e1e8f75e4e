"""A trainer command run through its own entry point in the test's process: its exit code,
stdout and stderr, for tests of what a run does rather than how its process behaves. A process
of its own would spend seconds importing torch and transformers again; that is most of the
cost of a tiny run.

    done = command_in_process(sft_main, "sft", *args)   # a CompletedProcess

What a run changes in this process (environment, log handlers and levels, matmul precision,
the process group) is undone afterwards (`restored`, also used by field_runs.isolated).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence


@contextlib.contextmanager
def restored() -> Iterator[None]:
    """Undo, on the way out, what a trainer run changes in this process."""
    import torch

    from trainspec.trainers.core.world import close_world

    env = dict(os.environ)
    precision = torch.get_float32_matmul_precision()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in ("trainspec", "verifiers")}
    try:
        yield
    finally:
        close_world()
        os.environ.clear()
        os.environ.update(env)
        torch.set_float32_matmul_precision(precision)
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(level)
        for name, was in levels.items():
            logging.getLogger(name).setLevel(was)


def command_in_process(
    main: Callable[[Sequence[str]], int], name: str, *args: str
) -> subprocess.CompletedProcess:
    out, err = io.StringIO(), io.StringIO()
    with restored(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess([name, *args], code, out.getvalue(), err.getvalue())
