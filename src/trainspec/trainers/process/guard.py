"""A trainer command's errors said the way config errors are (what, where, how to fix), never
as a traceback: setup refusals, what stopped a running run (a full disk), a signal before the
run's own handlers are in place.

    return run_guarded("sft", train, config)     # 0, or the exit code the failure calls for

Until the session installs its handlers (checkpoint and stop at a step boundary), and when
[control] is off, SIGTERM ends the process through `Interrupted`, with a line that says so and
that the checkpoints stand (they are written atomically); Ctrl-C (KeyboardInterrupt) alike.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from ..errors import RunError, SetupError, SetupErrors, io_reason
from ..run.lock import release_all


class Interrupted(BaseException):
    """A signal that ended the process outside a training step."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_received: list[int] = []  # signals `_interrupt` took, in case one was raised where it is lost


def _interrupt(signum, frame) -> None:
    _received.append(signum)
    raise Interrupted(signum)


def raise_if_interrupted() -> None:
    """Raise the `Interrupted` of a signal taken before now. Python drops an exception that a
    handler raises inside a finalizer (`__del__`, a weakref callback), so a SIGTERM at start-up
    could otherwise go unanswered; the session calls this as it takes the signals over."""
    if _received:
        raise Interrupted(_received[0])


def _unraisable(previous):
    """sys.unraisablehook that keeps quiet about a dropped `Interrupted`: Python would print
    it as "Exception ignored in ..." with a traceback, and the signal is answered anyway
    (`_received`, raise_if_interrupted)."""

    def hook(args) -> None:
        if args.exc_type is not None and issubclass(args.exc_type, Interrupted):
            return
        previous(args)

    return hook


def _say(text: str) -> None:
    if os.environ.get("RANK", "0") == "0":  # every rank fails alike: say it once
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


def run_guarded(command: str, train: Callable[[object], int], config) -> int:
    """`train(config)`, with every failure an operator can act on printed once (rank 0)."""
    on_main = threading.current_thread() is threading.main_thread()  # Python's rule for handlers
    previous = signal.signal(signal.SIGTERM, _interrupt) if on_main else None
    previous_hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(previous_hook)
    _received.clear()
    try:
        return train(config)
    except RunError as err:
        _say(f"{command}: stopped\n{err.render()}")
        return 1
    except (SetupError, SetupErrors) as err:
        _say(f"{command}: cannot start\n{err.render()}")
        return 1
    except OSError as err:  # a file of the run that cannot be written: the storage's doing
        where = Path(err.filename) if err.filename else Path(getattr(config, "output_dir", "."))
        reason = io_reason(err, where)
        if reason is None:
            raise
        _say(
            f"{command}: stopped\n{where}: error: {reason} ({err.strerror or err})\n"
            "    fix: free space or fix the permissions there and relaunch: the run resumes "
            "from its last checkpoint, which is intact"
        )
        return 1
    except (Interrupted, KeyboardInterrupt) as err:
        name = signal.Signals(err.signum).name if isinstance(err, Interrupted) else "SIGINT"
        _say(
            f"{command}: stopped by {name}; the checkpoints written stand (a relaunch resumes "
            "from the last one)"
        )
        return 128 + (err.signum if isinstance(err, Interrupted) else signal.SIGINT)
    finally:
        sys.unraisablehook = previous_hook
        if on_main:
            signal.signal(signal.SIGTERM, previous)
        release_all()  # the kernel would at exit; a caller that goes on needs them free now
