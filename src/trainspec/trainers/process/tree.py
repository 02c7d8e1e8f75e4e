"""A child process and every process under it, found in /proc and stopped together.

    tree = Tree(process)          # process: a subprocess.Popen
    tree.note()                   # remember who runs under it now (call it now and then)
    tree.kill()                   # SIGKILL it and all of them (each one's group too); reaped

torchrun's agent starts each worker in a session of its own, so a signal to the agent's process
group does not reach them, and once the agent is gone they are no longer its children: `rl`
notes the trainer's tree while it runs, and `kill` reaches every process it ever saw under it
that still runs (the same process: its start time is checked, a pid can be reused), as well as
those under it now. Linux only (/proc), as the rest of the process handling is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

Key = tuple[int, int]  # (pid, start time in clock ticks since boot)


def _stat(pid: int) -> tuple[int, int, int, str] | None:
    """(parent pid, process group, start time, state) of `pid`, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[2]), int(fields[19]), fields[0]


def _children() -> dict[int, list[int]]:
    """parent pid -> the pids of its children, of every live process."""
    found: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        stat = _stat(int(entry))
        if stat is not None and stat[3] not in ("Z", "X"):
            found.setdefault(stat[0], []).append(int(entry))
    return found


def descendants(pid: int) -> list[Key]:
    """Every live process under `pid` (children, theirs, ...), with its start time."""
    children, found, pending = _children(), [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            stat = _stat(child)
            if stat is not None:
                found.append((child, stat[2]))
                pending.append(child)
    return found


def _kill(key: Key) -> None:
    """SIGKILL the process `key` names if it still runs, and its group when it leads one."""
    pid, start = key
    stat = _stat(pid)
    if stat is None or stat[2] != start or stat[3] in ("Z", "X"):
        return  # gone, or the pid is another process's now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if stat[1] == pid:  # a group of its own (a torchrun worker): its helpers with it
            os.killpg(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)


class Tree:
    """A child process and the processes seen under it; see the module docstring."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.seen: set[Key] = set()

    def note(self) -> None:
        if self.process.poll() is None:
            self.seen.update(descendants(self.process.pid))

    def kill(self) -> None:
        """SIGKILL the process (its group too, when it leads one), then every process seen
        under it or under it now that still runs; the process is reaped (the others are
        their parents' or init's to reap)."""
        self.note()
        if self.process.poll() is None:  # not reaped: its pid (and group id) are still its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(self.process.pid) == self.process.pid:
                    os.killpg(self.process.pid, signal.SIGKILL)
            self.process.kill()
        self.process.wait()
        for key in sorted(self.seen):
            _kill(key)
