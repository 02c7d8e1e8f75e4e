"""A server in a process of its own, the one way trainspec starts and stops one: the vLLM
server of `[inference]` (inference_server.py) and the orchestrator's environment servers
(orchestrator/environments/env_servers.py).

    server = ServerProcess(argv, log_path, env=env).start()   # OSError if it cannot start
    server.poll(), server.log_tail()                          # exit code or None; the log's end
    stop_all([server, ...], grace_s=30.0)                     # TERM, then KILL; always reaped

Each runs in a session of its own, so the processes it starts (a pool's workers, vLLM's engine)
are signalled with it; its output is appended to `log_path`. Stopping sends SIGTERM to every
group at once, waits for all of them (each whole group, not only its leader) up to one
shared grace period, then SIGKILLs what is left, and reaps each. Waiting until it is ready is
the caller's: each kind of server answers its own health check.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path


class ServerProcess:
    """One server process; see the module docstring."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.log_path = Path(log_path)
        self.env = env
        self.process: subprocess.Popen | None = None
        self.ended_at: float | None = None  # boot clock when it was first seen ended

    def start(self) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )
        return self

    def poll(self) -> int | None:
        code = None if self.process is None else self.process.poll()
        if code is not None and self.ended_at is None:
            self.ended_at = time.clock_gettime(time.CLOCK_BOOTTIME)
        return code

    def log_tail(self, lines: int = 15) -> list[str]:
        """The last `lines` lines of its log ([] when there is none to read)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return text.rstrip().splitlines()[-lines:]

    def stop(self, grace_s: float) -> None:
        stop_all([self], grace_s)


def stop_all(servers: Iterable[ServerProcess], grace_s: float) -> None:
    """SIGTERM to every server's process group, then one shared wait of `grace_s`, then SIGKILL
    to what is left; the servers are reaped. A server killed from outside (the OOM killer)
    leaves its workers (vLLM's engine core) behind in its group: they are signalled too, those
    of them that started before it was seen ended (its group id could name another group once
    they are all gone)."""
    started = [s for s in servers if s.process is not None]
    for server in started:
        server.poll()  # notes when a server already ended
        _signal(server, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for server in started:
        process = server.process
        assert process is not None
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(server, signal.SIGKILL)
            process.wait()
        server.poll()
        # the rest of its group (vLLM's engine core outlives its API server by a moment): gone
        # within the same grace period, or killed
        while _members(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal(server, signal.SIGKILL)


def _members(server: ServerProcess) -> list[int]:
    """The live processes of the server's group that started before it was seen ended."""
    assert server.process is not None
    group, ticks = server.process.pid, os.sysconf("SC_CLK_TCK")
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path("/proc", entry, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, pgrp, start = fields[0], int(fields[2]), int(fields[19]) / ticks
        before_its_end = server.ended_at is None or start <= server.ended_at
        if pgrp == group and state not in ("Z", "X") and before_its_end:
            found.append(int(entry))
    return found


def _signal(server: ServerProcess, signum: signal.Signals) -> None:
    assert server.process is not None
    if server.ended_at is None:  # its leader lives: the group id is its own
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.process.pid, signum)
        return
    for pid in _members(server):
        with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
            os.kill(pid, signum)
