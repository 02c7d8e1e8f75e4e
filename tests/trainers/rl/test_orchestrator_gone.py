"""The RL trainer's wait for a batch ends when the orchestrator is gone (rl/train.py,
process/liveness.py): one that ended, or whose sign of life went stale (killed, its node lost),
sends no more batches, and the trainer says so instead of waiting forever. The orchestrator
here is a real process that writes the sign of life the orchestrator writes, and batches
through the real filesystem transport."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.processes import outcome_within

from trainspec.config import load
from trainspec.trainers.errors import RunError
from trainspec.trainers.process import liveness
from trainspec.trainers.rl.train import TransportRollouts

WAIT_S = 240  # generous: a busy 2-core machine (before the fix the wait never ended)

# An orchestrator: alive (beating every 0.2 s), sends step 0's batch, then ends (`end`) or
# stays until it is killed (`killed`).
ORCHESTRATOR = """
import sys, time
from pathlib import Path
import torch
from trainspec.trainers.process.liveness import LifeSign, orchestrator_sign
from trainspec.trainers.wire.batch import RLMicroBatch, RolloutBatch
from trainspec.trainers.wire.transport_fs import FileSystemSender
run_dir, how = Path(sys.argv[1]), sys.argv[2]
rows = lambda: torch.zeros(1, 4, dtype=torch.long)
mb = RLMicroBatch(input_ids=rows(), position_ids=rows(), targets=rows(), loss_mask=rows().bool(),
                  advantages=rows().float(), inference_logprobs=rows().float())
with LifeSign(orchestrator_sign(run_dir), beat_s=0.2) as life:
    time.sleep(1.0)  # seen alive first
    FileSystemSender(run_dir, 1).send(0, 0, RolloutBatch(0, 0, 1.0, [mb]))
    life.step = 1
    print("sent", flush=True)
    if how == "killed":
        time.sleep(3600)
"""


def transport(run_dir: Path):
    config = load("rl", [], {"rollout_transport.type": "filesystem", "output_dir": str(run_dir)})
    return config.config.rollout_transport


def wait_in_thread(source: TransportRollouts, step: int) -> list:
    """source.next(step), bounded by WAIT_S: [batch] or [the error it raised]."""
    call = lambda: source.next(step, lambda: False)  # noqa: E731
    return [outcome_within(call, WAIT_S, "a batch that will not come")]


def orchestrator(run_dir: Path, how: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", ORCHESTRATOR, str(run_dir), how], stdout=subprocess.PIPE, text=True
    )


def test_an_orchestrator_that_ended_ends_the_wait_naming_it(tmp_path):
    source = TransportRollouts(transport(tmp_path), tmp_path, rank=0)  # the trainer first
    process = orchestrator(tmp_path, "end")
    assert process.wait(timeout=WAIT_S) == 0
    (batch,) = wait_in_thread(source, 0)  # sent before it ended: still taken
    assert batch.step == 0
    (error,) = wait_in_thread(source, 1)
    assert isinstance(error, RunError), error
    assert error.path == str(liveness.orchestrator_sign(tmp_path))
    assert f"the orchestrator (pid {process.pid} on " in error.problem
    assert "ended (stopped) at its step 1; no batch of step 1 will come" in error.problem
    assert "start the orchestrator with the same output_dir" in error.fix


def test_an_orchestrator_killed_without_a_word_ends_the_wait_once_its_sign_is_stale(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(liveness, "STALE_S", 15.0)  # 75 beats of 0.2 s: no false alarm
    source = TransportRollouts(transport(tmp_path), tmp_path, rank=0)
    process = orchestrator(tmp_path, "killed")
    try:
        assert process.stdout.readline() == "sent\n"
        (batch,) = wait_in_thread(source, 0)
        assert batch.step == 0
        process.send_signal(signal.SIGKILL)  # the OOM killer, a lost node: no last word
        process.wait(timeout=WAIT_S)
        (error,) = wait_in_thread(source, 1)
    finally:
        process.kill()
        process.wait()
    assert isinstance(error, RunError), error
    assert "has shown no sign of life in" in error.problem and "was killed" in error.problem


def test_a_sign_left_by_an_earlier_run_is_not_judged(tmp_path, monkeypatch):
    """An orchestrator of an earlier run that was killed left a sign that never changes: a
    trainer that starts before this run's orchestrator waits for it (its wait ends once it
    is asked to stop)."""
    monkeypatch.setattr(liveness, "STALE_S", 0.5)
    sign = liveness.orchestrator_sign(tmp_path)
    sign.parent.mkdir(parents=True)
    sign.write_text('{"pid": 1, "host": "x", "beat": 3, "step": 2, "state": "alive"}\n')
    source = TransportRollouts(transport(tmp_path), tmp_path, rank=0)
    asked = []
    assert source.next(0, lambda: asked.append(1) or len(asked) > 400) is None  # ~2 s of polls


def test_an_orchestrator_never_started_ends_the_wait_after_a_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(liveness, "FIRST_S", 1.0)
    source = TransportRollouts(transport(tmp_path), tmp_path, rank=0)
    (error,) = wait_in_thread(source, 0)
    assert isinstance(error, RunError), error
    assert "the orchestrator has shown no sign of life in" in error.problem
    assert "it was not started, or not with this run directory" in error.problem


@pytest.fixture(autouse=True)
def quick_checks(monkeypatch):
    monkeypatch.setattr(liveness, "CHECK_S", 0.1)
