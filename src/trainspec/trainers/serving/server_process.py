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
        return None if self.process is None else self.process.poll()

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
    """SIGTERM to every running server's process group, then one shared wait of `grace_s`,
    then SIGKILL to what is left; every process is reaped."""
    running = [s.process for s in servers if s.process is not None and s.process.poll() is None]
    for process in running:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()
        # the rest of its group (vLLM's engine core outlives its API server by a moment): gone
        # within the same grace period, or killed
        while _group_alive(process) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_group(process, signal.SIGKILL)


def _group_alive(process: subprocess.Popen) -> bool:
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


def _signal_group(process: subprocess.Popen, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile; wait() reaps it
        os.killpg(process.pid, signum)
