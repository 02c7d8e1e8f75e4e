"""Signals that ask a process to stop (or checkpoint): the handler only counts them, and the
process acts at its next safe point, so the work in hand always finishes.

    stop = SignalFlag((signal.SIGTERM, signal.SIGINT)).install()
    while not stop():
        ...one unit of work...
    stop.restore()                        # the handlers that were there before come back

A signal named in `repeat_passes_on` (by default SIGINT) that arrives a second time goes to the
handler that was there before (for SIGINT: KeyboardInterrupt), so a second Ctrl-C always
breaks a wait, whatever the first one asked to finish; when that handler is another flag's, it
goes on to the one before that flag (a second Ctrl-C is not a first one to the flag below). Any
other repeat is the same request again and counts: a scheduler
SIGTERMs every process of a job, torchrun's agent among them, and the agent passes its
SIGTERM on, so a worker gets two; so does one whose launcher passes a Ctrl-C on as SIGTERM.
Python lets only the main thread set handlers; elsewhere `install` leaves the signals alone,
with a warning.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

logger = logging.getLogger(__name__)

# What `signal.signal` takes and gives back: a function, SIG_DFL / SIG_IGN, or None (a handler
# not set from Python).
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class SignalFlag:
    """Raised by any of `signals`; `count` says how many arrived."""

    def __init__(
        self,
        signals: Iterable[signal.Signals],
        *,
        repeat_passes_on: Iterable[signal.Signals] = (signal.SIGINT,),
    ):
        self.signals = tuple(signals)
        self.repeat_passes_on = frozenset(repeat_passes_on)
        self.count = 0
        self._seen: set[int] = set()
        self._previous: dict[signal.Signals, Handler] = {}

    def __call__(self) -> bool:
        """Whether a signal has arrived."""
        return self.count > 0

    def install(self) -> SignalFlag:
        """Set the handlers, remembering the ones they replace; a second call does nothing."""
        if self._previous or not self.signals:
            return self
        if threading.current_thread() is not threading.main_thread():
            logger.warning("not on the main thread, so %s are not handled", self._names())
            return self
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _names(self) -> str:
        return ", ".join(signum.name for signum in self.signals)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if signum in self.repeat_passes_on and signum in self._seen:
            self._pass_on(signum, frame)
            return
        self._seen.add(signum)
        self.count += 1

    def _pass_on(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signal.Signals(signum), signal.SIG_DFL)
        below = getattr(previous, "__self__", None)
        if isinstance(below, SignalFlag):  # a flag installed before this one: past it too
            below._pass_on(signum, frame)
        elif callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            # The default action (terminate for SIGTERM/SIGUSR*, KeyboardInterrupt for SIGINT).
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
            signal.raise_signal(signum)

    def restore(self) -> None:
        """Put back the handlers that `install` replaced."""
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()
