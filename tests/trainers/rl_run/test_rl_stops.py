"""How `rl` stops its sides (rl_run/supervise.py), as real processes: `rl` itself, torchrun and
its workers, with the sides stand-ins (stand_in_side.py) that hang or end early on demand.

* A trainer still running after the grace period is killed with every process under it:
  torchrun's workers run in sessions of their own and used to outlive their agent.
* An orchestrator that exits 0 before the trainer has finished is a failure, not a run that
  waits forever for batches that will not come.
* A second Ctrl-C ends `rl` at once, whatever it was waiting for after the first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers.processes import alive, ended
from test_rl_command import write_config

STAND_IN = Path(__file__).resolve().parent / "stand_in_side.py"
WAIT_S = 240  # generous: a busy 2-core machine (before the fixes these waits never ended)
RL = (
    "import sys; from trainspec.trainers.rl_run import main, supervise; "
    "main.CHILD = (sys.argv[1],); supervise.STOP_GRACE_S = float(sys.argv[2]); "
    "sys.exit(main.main(sys.argv[3:]))"
)


def start_rl(tmp_path: Path, grace_s: float, *args: str, **sides: str) -> subprocess.Popen:
    """`rl` on a small config with CHILD the stand-in; `sides`: STAND_IN_* settings."""
    (tmp_path / "pids").mkdir()
    env = {**os.environ, "STAND_IN_DIR": str(tmp_path / "pids")}
    env |= {f"STAND_IN_{key.upper()}": value for key, value in sides.items()}
    config = write_config(tmp_path, max_steps=5)
    argv = [sys.executable, "-c", RL, str(STAND_IN), str(grace_s), str(config), *args]
    return subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)


def pids(tmp_path: Path, side: str) -> list[int]:
    return [int(path.name.split("-")[1]) for path in (tmp_path / "pids").glob(f"{side}-*")]


def wait_for_pids(tmp_path: Path, side: str, count: int, rl: subprocess.Popen) -> list[int]:
    deadline = time.monotonic() + WAIT_S
    while len(pids(tmp_path, side)) < count:
        assert rl.poll() is None, rl.communicate()
        assert time.monotonic() < deadline, f"no {side} started"
        time.sleep(0.1)
    return pids(tmp_path, side)


def finish(rl: subprocess.Popen, tmp_path: Path) -> None:
    """Whatever the test saw, nothing it started runs on (before the fixes some would)."""
    with contextlib.suppress(ProcessLookupError):
        rl.kill()
    rl.wait()
    for side in ("trainer", "orchestrator"):
        for pid in pids(tmp_path, side):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_trainer_past_its_grace_period_is_killed_with_torchruns_workers(tmp_path):
    """The orchestrator fails; the trainer (two torchrun workers that ignore SIGTERM) is asked
    to stop, and killed after the grace period: its workers too, not only torchrun's agent."""
    rl = start_rl(
        tmp_path, 3, "--deployment.num_train_gpus", "2",
        trainer="hang", orchestrator="fail", workers="2",
    )  # fmt: skip
    try:
        workers = wait_for_pids(tmp_path, "trainer", 2, rl)
        _, err = rl.communicate(timeout=WAIT_S)
        assert rl.returncode == 1, err
        assert "the orchestrator failed with exit code 1" in err
        assert "has not ended 3 s after SIGTERM: killing it, and every process under it" in err
        assert all(ended(pid) for pid in workers), "a torchrun worker outlived rl"
    finally:
        finish(rl, tmp_path)


def test_an_orchestrator_that_exits_0_early_stops_the_run_as_a_failure(tmp_path):
    rl = start_rl(tmp_path, 60, trainer="polite", orchestrator="early")
    try:
        (trainer,) = wait_for_pids(tmp_path, "trainer", 1, rl)
        _, err = rl.communicate(timeout=WAIT_S)
        assert rl.returncode == 1, err
        assert "the orchestrator exited with code 0 before it said where it was" in err
        assert "no more batches will come" in err and "Traceback" not in err
        assert ended(trainer)
    finally:
        finish(rl, tmp_path)


def test_a_second_ctrl_c_ends_rl_at_once(tmp_path):
    """The first Ctrl-C asks both sides to stop; the trainer does not (a step that hangs), and
    `rl` would wait out the grace period (600 s); the second ends it, and the trainer, now."""
    rl = start_rl(tmp_path, 600, trainer="hang", orchestrator="polite")
    try:
        (orchestrator,) = wait_for_pids(tmp_path, "orchestrator", 1, rl)
        (trainer,) = wait_for_pids(tmp_path, "trainer", 1, rl)
        rl.send_signal(signal.SIGINT)
        assert ended(orchestrator, WAIT_S)  # the first Ctrl-C was passed on as a stop
        assert alive(trainer) and rl.poll() is None  # the trainer ignores it: rl waits
        rl.send_signal(signal.SIGINT)
        _, err = rl.communicate(timeout=60)
        assert rl.returncode == 130, err
        assert "a second Ctrl-C: killing what rl started" in err and "Traceback" not in err
        assert ended(trainer)
    finally:
        finish(rl, tmp_path)
