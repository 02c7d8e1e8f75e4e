"""The orchestrator's wait for the trainer's weights ends when the trainer is gone
(orchestrator/policy.py, process/liveness.py): a trainer that ended, or whose sign of life went
stale (killed, its node lost), publishes no more weights, and the orchestrator says so instead of
waiting forever; weights it published before it went are still taken. The trainer here is a
real process that writes the sign of life the RL trainer writes."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from helpers.processes import outcome_within

from trainspec.config import load
from trainspec.trainers.errors import RunError
from trainspec.trainers.orchestrator.policy import Policy
from trainspec.trainers.process import liveness

WAIT_S = 240  # generous: a busy 2-core machine (before the fix the wait never ended)

# A trainer: alive (beating every 0.2 s), optionally publishes step 1's weights (a directory
# given), reaches step 1, then ends (`end`) or stays until it is killed (`killed`).
TRAINER = """
import shutil, sys, time
from pathlib import Path
from trainspec.trainers.process.liveness import LifeSign, trainer_sign
from trainspec.trainers.wire.broadcast import READY, broadcast_dir
run_dir, how, weights = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
with LifeSign(trainer_sign(run_dir), beat_s=0.2) as life:
    time.sleep(1.0)  # seen alive first
    if weights:
        shutil.copytree(weights, broadcast_dir(run_dir, 1))
        (broadcast_dir(run_dir, 1) / READY).touch()
    life.step = 1
    print("stepped", flush=True)
    if how == "killed":
        time.sleep(3600)
"""


def policy(run_dir: Path) -> Policy:
    config = load("orchestrator", [], {"output_dir": str(run_dir)}).config
    return Policy(config, run_dir, tokenizer=None, stop_id=0)


def wait(waiting_policy: Policy, step: int):
    """policy.wait_for(step): True/False, or the error it raised; the test fails if it lasts."""
    call = lambda: waiting_policy.wait_for(step, lambda: False)  # noqa: E731
    return outcome_within(call, WAIT_S, "weights that will not come")


def trainer(run_dir: Path, how: str, weights: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, "-c", TRAINER, str(run_dir), how, str(weights or "")]
    return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)


def test_a_trainer_that_ended_ends_the_wait_naming_it(tmp_path):
    waiting = policy(tmp_path)  # the orchestrator first
    process = trainer(tmp_path, "end")
    assert process.wait(timeout=WAIT_S) == 0
    error = wait(waiting, 2)
    assert isinstance(error, RunError), error
    assert error.path == str(liveness.trainer_sign(tmp_path))
    assert f"the trainer (pid {process.pid} on " in error.problem
    assert "ended (stopped) at its step 1; its weights of step 2 will not come" in error.problem
    assert "start the trainer again with the same output_dir" in error.fix


def test_weights_published_before_the_trainer_ended_are_still_taken(tmp_path, tiny_weights):
    waiting = policy(tmp_path)
    process = trainer(tmp_path, "end", tiny_weights(0))
    assert process.wait(timeout=WAIT_S) == 0
    assert wait(waiting, 1) is True
    assert waiting.step == 1
    error = wait(waiting, 2)  # and nothing after them
    assert isinstance(error, RunError) and "ended (stopped) at its step 1" in error.problem


def test_a_trainer_killed_without_a_word_ends_the_wait_once_its_sign_is_stale(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(liveness, "STALE_S", 15.0)  # 75 beats of 0.2 s: no false alarm
    waiting = policy(tmp_path)
    process = trainer(tmp_path, "killed")
    try:
        assert process.stdout.readline() == "stepped\n"
        process.send_signal(signal.SIGKILL)  # the OOM killer, a lost node: no last word
        process.wait(timeout=WAIT_S)
        error = wait(waiting, 2)
    finally:
        process.kill()
        process.wait()
    assert isinstance(error, RunError), error
    assert "has shown no sign of life in" in error.problem and "was killed" in error.problem


def test_a_sign_left_by_an_earlier_run_is_not_judged(tmp_path, monkeypatch):
    """A trainer of an earlier run left a sign that says it ended: an orchestrator started
    before this run's trainer waits for it (its wait ends once it is asked to stop)."""
    monkeypatch.setattr(liveness, "STALE_S", 0.5)
    liveness.trainer_sign(tmp_path).write_text(
        '{"pid": 1, "host": "x", "beat": 3, "step": 2, "state": "ended", "how": "stopped"}\n'
    )
    waiting = policy(tmp_path)
    asked: list[int] = []
    assert waiting.wait_for(3, lambda: asked.append(1) or len(asked) > 400) is False  # ~2 s
