"""serving/server_process.py on real processes: a server's whole process group is stopped (the
children it started too), one that ignores SIGTERM is killed after the grace period, every
process is reaped, and its log's end is readable."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from helpers.processes import alive, ended

from trainspec.trainers.serving.server_process import ServerProcess, stop_all

# A "server" that starts a child of its own, says both pids, and waits; with IGNORE it
# outlives SIGTERM (its child too), as a hung server does.
PROGRAM = """
import os, signal, subprocess, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import signal, time, sys;"
    + ("signal.signal(signal.SIGTERM, signal.SIG_IGN);" if sys.argv[1] == "ignore" else "")
    + "time.sleep(600)"])
print(os.getpid(), child.pid, flush=True)
time.sleep(600)
"""


def started(tmp_path: Path, name: str, mode: str) -> tuple[ServerProcess, int]:
    server = ServerProcess([sys.executable, "-c", PROGRAM, mode], tmp_path / f"{name}.log")
    server.start()
    deadline = time.monotonic() + 60
    while not server.log_tail() and time.monotonic() < deadline:
        time.sleep(0.1)
    pid, child = map(int, server.log_tail()[-1].split())
    assert pid == server.process.pid and server.poll() is None
    return server, child


def test_stop_all_ends_each_group_with_its_children_and_reaps_it(tmp_path):
    polite, polite_child = started(tmp_path, "polite", "exit")
    stubborn, stubborn_child = started(tmp_path, "stubborn", "ignore")
    begun = time.monotonic()
    stop_all([polite, stubborn], grace_s=3.0)
    took = time.monotonic() - begun
    assert polite.process.returncode == -15  # SIGTERM
    assert stubborn.process.returncode == -9  # SIGKILL, once the grace period was over
    assert took >= 3.0  # killed only once the grace period was over
    assert ended(polite_child) and ended(stubborn_child)  # init reaps them


def test_stopping_a_server_that_has_exited_or_never_started_does_nothing(tmp_path):
    never = ServerProcess([sys.executable, "-c", "pass"], tmp_path / "never.log")
    never.stop(grace_s=1.0)
    assert never.poll() is None and never.log_tail() == []
    done = ServerProcess([sys.executable, "-c", "print('bye')"], tmp_path / "done.log").start()
    done.process.wait(timeout=60)
    done.stop(grace_s=1.0)
    assert done.poll() == 0 and done.log_tail() == ["bye"]


def test_a_server_killed_from_outside_has_the_children_it_left_stopped(tmp_path):
    """SIGKILL to the server alone (the OOM killer): its child lives on in its group, and
    stopping the server ends it (the group's processes that started before the server was seen
    ended are signalled one by one: its id could later name another group)."""
    import os
    import signal

    server, child = started(tmp_path, "killed", "exit")
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=60)
    assert server.poll() == -9 and alive(child)  # left behind: the check can fail
    server.stop(grace_s=3.0)
    assert ended(child)


def test_a_group_whose_leader_is_gone_does_not_keep_the_others_from_being_stopped(tmp_path):
    """Issue 36: stopping the servers raised ProcessLookupError at the first whose leader had
    already died (killed from outside), and the servers after it were left running."""
    import os
    import signal

    dead, dead_child = started(tmp_path, "dead", "exit")
    live, live_child = started(tmp_path, "live", "exit")
    os.kill(dead.process.pid, signal.SIGKILL)
    dead.process.wait(timeout=60)  # reaped: its pid names nothing now
    stop_all([dead, live], grace_s=3.0)  # no ProcessLookupError
    assert live.process.returncode == -15
    assert ended(dead_child) and ended(live_child)
