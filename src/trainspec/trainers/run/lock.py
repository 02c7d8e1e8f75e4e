"""One process writes a run directory at a time: an OS file lock on `<run dir>/.lock`.

    lock = lock_run_dir(run_dir, "sft", setting="run.name")   # SetupError when another run has it
    ...
    lock.release()                                             # or let the process end

The lock is `flock` on the file: the kernel drops it when the process ends, however it ends, so
a crashed run leaves no stale lock; the file only says who held it last (pid, host, command,
start time), for the message the next run prints. A launcher that holds the lock for its
workers (the `sft` command before torchrun, `rl` before its trainer) names the directory in
TRAINSPEC_LOCKED_RUN_DIR, and a worker finding its own directory there takes no lock of its own.
Locks of network filesystems may not be honoured (NFS without lockd): one run per directory
stays the operator's rule there.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import IO

from ..errors import SetupError

LOCK_FILE = ".lock"
INHERITED = "TRAINSPEC_LOCKED_RUN_DIR"
_held: dict[Path, RunLock] = {}  # this process's locks, by directory


class RunLock:
    def __init__(self, directory: Path, handle: IO[str] | None) -> None:
        self.directory = directory
        self._handle = handle  # None: a parent process holds the lock

    def release(self) -> None:
        _held.pop(self.directory, None)
        if self._handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def _holder(path: Path) -> str:
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {info['pid']} on {info['host']} ({info['command']}, started {info['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def lock_run_dir(run_dir: Path, command: str, *, setting: str) -> RunLock:
    """Take the run directory's lock for this process (creating the directory); a run already
    holding it is a SetupError on `setting`, the setting that chose the directory."""
    directory = Path(run_dir).resolve()
    if directory in _held:
        return _held[directory]
    inherited = os.environ.get(INHERITED)
    if inherited and Path(inherited).resolve() == directory:
        lock = _held[directory] = RunLock(directory, None)
        return lock
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = open(directory / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 (held)
    except OSError as exc:
        raise SetupError(
            "output_dir",
            f"cannot create the run directory {directory}: {exc.strerror or exc}",
            "point output_dir at a writable location",
        ) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise SetupError(
            setting,
            f"the run directory {directory} is in use by {_holder(directory / LOCK_FILE)}",
            f"wait for that run to end (or stop it: a `stop` file in its control directory), "
            f"or give this run another {setting}",
        ) from None
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200] or command,
        "started": dt.datetime.now().isoformat(timespec="seconds"),
    }
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(record) + "\n")
    handle.flush()
    lock = _held[directory] = RunLock(directory, handle)
    return lock


def release_run_dir(run_dir: Path) -> None:
    """Give up this process's lock of `run_dir`, if it holds one."""
    lock = _held.get(Path(run_dir).resolve())
    if lock is not None:
        lock.release()


def release_all() -> None:
    """Give up every lock this process holds (a run that ends with an error)."""
    for lock in list(_held.values()):
        lock.release()
