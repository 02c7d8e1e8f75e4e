"""A process's sign of life in the shared run directory, for a peer that waits on it on this
node or another: the orchestrator's, which the RL trainer checks while it waits for a batch and
`rl` reads when the orchestrator ends first; the trainer's, which the orchestrator checks while
it waits for the trainer's weights.

    with LifeSign(path) as life:     # written now, rewritten every BEAT_S by a thread
        life.step = step             # the step it has reached, said in the next beat
        life.finished = True         # it ran to its end (not stopped)
    # on leaving: state "ended", and how: "finished", "stopped" or "failed: <error>"

    watch = LifeWatch(path)          # the waiting peer's side
    watch.gone()                     # None while it lives (or has not been seen), else why not

The file is JSON ({"pid", "host", "beat", "step", "state", "how"}), written whole each time
(run/atomic_files.py). The watcher compares what it reads, never clocks, so two nodes'
clocks need not agree: a sign that has not changed for `stale_s` seconds of the watcher's own
clock is a peer that is gone (killed, its node lost), as is one that says it ended. A sign the
watcher found already there when it started is a peer of an earlier run until it changes, and
is not judged: only a peer seen alive during the watch is. One never seen alive for FIRST_S
(the peer writes its sign as it starts) is a peer that was never started.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path

from ..run.atomic_files import write_atomic
from .guard import Interrupted

BEAT_S = 10.0  # how often a live process rewrites its sign
STALE_S = 600.0  # how long a sign may stay the same before its process counts as gone
FIRST_S = 1800.0  # how long a watcher waits to see a sign change at all (the peer starts)
CHECK_S = 1.0  # how often a watcher reads the file


class LifeSign:
    """The writing side; see the module docstring."""

    def __init__(self, path: Path, beat_s: float = BEAT_S) -> None:
        self.path = Path(path)
        self.beat_s = beat_s
        self.step: int | None = None
        self.finished = False
        self._beats = 0
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="life-sign", daemon=True)

    def _write(self, state: str, how: str | None = None) -> None:
        with self._lock:
            self._beats += 1
            record = {"pid": os.getpid(), "host": socket.gethostname(), "beat": self._beats,
                      "step": self.step, "state": state, "how": how}  # fmt: skip
            with contextlib.suppress(OSError):  # a full disk says so elsewhere; the next beat
                write_atomic(self.path, json.dumps(record) + "\n", private=True)

    def _run(self) -> None:
        while not self._done.wait(self.beat_s):
            self._write("alive")

    def __enter__(self) -> LifeSign:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._write("alive")
        self._thread.start()
        return self

    def __exit__(self, kind, error, traceback) -> None:
        self._done.set()
        self._thread.join(timeout=2 * self.beat_s)
        if error is None:
            how = "finished" if self.finished else "stopped"
        elif isinstance(error, KeyboardInterrupt | Interrupted):
            how = "stopped"
        else:
            said = str(error).splitlines()[0] if str(error) else ""
            how = f"failed: {type(error).__name__}: {said}"
        self._write("ended", how)


def read_sign(path: Path) -> dict | None:
    """The sign at `path`, None when there is none or it cannot be read."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def describe(record: dict) -> str:
    return f"pid {record.get('pid')} on {record.get('host')}"


class LifeWatch:
    """The waiting side; see the module docstring."""

    def __init__(self, path: Path, *, stale_s: float | None = None, name: str = "the peer"):
        self.path = Path(path)
        self.stale_s = stale_s
        self.name = name
        self._last = self._read()
        self._started = self._changed = time.monotonic()
        self._checked = 0.0
        self._seen = False
        self._verdict: str | None = None

    def _read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except OSError:
            return None

    def gone(self) -> str | None:
        """Why the peer is gone, or None while it lives (or has not been seen alive)."""
        now = time.monotonic()
        if self._verdict is not None or now - self._checked < CHECK_S:
            return self._verdict
        self._checked = now
        content = self._read()
        if content is not None and content != self._last:
            self._last, self._changed, self._seen = content, now, True
        if not self._seen or self._last is None:
            if now - self._started > FIRST_S:
                self._verdict = (
                    f"{self.name} has shown no sign of life in {self.path} in the "
                    f"{now - self._started:.0f} s since this process began to wait for it (it "
                    "writes one as it starts: it was not started, or not with this run directory)"
                )
            return self._verdict
        record = read_sign(self.path) or {}
        stale_s = STALE_S if self.stale_s is None else self.stale_s
        if record.get("state") == "ended":
            self._verdict = f"{self.name} ({describe(record)}) ended ({record.get('how')})"
            if record.get("step") is not None:  # None: it ended before its first step
                self._verdict += f" at its step {record['step']}"
        elif now - self._changed > stale_s:
            self._verdict = (
                f"{self.name} ({describe(record)}) has shown no sign of life in {self.path} "
                f"for {now - self._changed:.0f} s (it rewrites it every {BEAT_S:.0f} s while it "
                "runs: it was killed, or its node was lost)"
            )
        return self._verdict


def orchestrator_sign(run_dir: Path) -> Path:
    """Where the orchestrator of the run in `run_dir` keeps its sign of life."""
    return Path(run_dir) / "orchestrator" / "alive.json"


def trainer_sign(run_dir: Path) -> Path:
    """Where the RL trainer of the run in `run_dir` keeps its sign of life (its rank 0)."""
    return Path(run_dir) / "trainer-alive.json"
