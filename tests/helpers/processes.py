"""Processes the tests start and watch: whether one still runs, and a command signalled while
the server it started (the stand-in vLLM, tests/trainers/rl_run/stand_in_vllm.py) comes up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie (ended, not yet reaped by init) does not."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def ended(pid: int, timeout_s: float = 60.0) -> bool:
    """Whether `pid` has ended within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return not alive(pid)


def sigterm_while_the_server_starts(code: str, arg: Path, record: Path) -> tuple[int, bytes, int]:
    """Run `python -c code arg` with the stand-in server hanging (never ready), SIGTERM it once
    the server has started, and return its exit code, its stderr and the server's pid."""
    env = {**os.environ, "STAND_IN_MODE": "hang"}
    command = subprocess.Popen(
        [sys.executable, "-c", code, str(arg)], env=env, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not record.exists() and time.monotonic() < deadline and command.poll() is None:
            time.sleep(0.2)
        server = json.loads(record.read_text())["pid"]  # started, and never ready
        command.send_signal(signal.SIGTERM)
        _, err = command.communicate(timeout=120)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    return command.returncode, err, server
