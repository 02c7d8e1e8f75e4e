"""Processes the tests start and watch: whether one still runs, a wait run in a thread with a
bound (a wait that should end), the stand-in vLLM server (tests/trainers/rl_run/stand_in_vllm.py)
put where `rl` and `sft` start vLLM, and a command signalled while that server comes up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

STAND_IN = Path(__file__).resolve().parents[1] / "trainers" / "rl_run" / "stand_in_vllm.py"
# The same, in a child `python -c` (the test's monkeypatch does not reach it): vllm_plan's
# functions look both names up in their module when they build a plan.
PATCH_STAND_IN = (
    "import sys as _sys; from trainspec.trainers.serving import vllm_plan as _plan; "
    f"_plan.vllm_command = lambda: [_sys.executable, {str(STAND_IN)!r}]; "
    "_plan.vllm_installed = lambda: True; "
)


def use_stand_in(monkeypatch, record: Path) -> None:
    """vLLM's command replaced by the stand-in (vLLM counted as installed), which writes what it
    was started with to `record`."""
    from trainspec.trainers.serving import vllm_plan

    monkeypatch.setattr(vllm_plan, "vllm_command", lambda: [sys.executable, str(STAND_IN)])
    monkeypatch.setattr(vllm_plan, "vllm_installed", lambda: True)
    monkeypatch.setenv("STAND_IN_RECORD", str(record))


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


def outcome_within(call: Callable[[], object], wait_s: float, waiting_for: str) -> object:
    """What `call()` returned or raised, run in a thread joined for `wait_s`; fails the test,
    saying `waiting_for`, when it is still running then (the wait under test never ended)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # noqa: BLE001 (what the wait raised is the result)
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(wait_s)
    assert not thread.is_alive(), f"still waiting for {waiting_for}"
    return outcome[0]


def signal_while_the_server_starts(
    code: str, arg: Path, record: Path, sent: signal.Signals = signal.SIGTERM
) -> tuple[int, bytes, int]:
    """Run `python -c code arg` with vLLM's command the stand-in's (PATCH_STAND_IN, run before
    `code`), hanging (never ready); send it `sent` (SIGTERM; SIGINT is a Ctrl-C) once the
    server has started, and return its exit code, its stderr and the server's pid."""
    env = {**os.environ, "STAND_IN_MODE": "hang", "STAND_IN_RECORD": str(record)}
    command = subprocess.Popen(
        [sys.executable, "-c", PATCH_STAND_IN + code, str(arg)], env=env, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while not record.exists() and time.monotonic() < deadline and command.poll() is None:
            time.sleep(0.2)
        if not record.exists():
            if command.poll() is None:
                command.kill()
            _, err = command.communicate()
            raise AssertionError(f"the stand-in server never started; the command said:\n{err}")
        server = json.loads(record.read_text())["pid"]  # started, and never ready
        command.send_signal(sent)
        _, err = command.communicate(timeout=120)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    return command.returncode, err, server
