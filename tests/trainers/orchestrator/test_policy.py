"""The orchestrator's wait for the trainer's weights (orchestrator/policy.py) when a broadcast
marked ready does not load: it retries, sleeping and asking whether to stop between tries, and
gives up at the retry limit or the first-weights timeout, naming what it waited for."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from helpers.orchestrator_runs import small_run

from trainspec.trainers.wire.broadcast import READY, broadcast_dir

WAIT_S = 120.0


@pytest.fixture
def unloadable(tmp_path, tiny_weights) -> Path:
    """A broadcast of step 0 marked ready whose weights are gone (a disk that lost them)."""
    target = broadcast_dir(tmp_path, 0)
    target.mkdir(parents=True)
    shutil.copy(tiny_weights(0) / "config.json", target)
    (target / READY).touch()
    return target


def test_a_broadcast_that_does_not_load_is_retried_while_stop_is_still_heard(
    tmp_path, tokenizer, unloadable, monkeypatch
):
    """Each failed load sleeps and asks whether to stop, as any wait does (it was a busy loop
    that never asked: 73,000 loads in 2 s)."""
    from trainspec.trainers.orchestrator import policy as policy_module

    monkeypatch.setattr(policy_module, "POLL_S", 0.05)
    policy = policy_module.Policy(
        small_run(tmp_path, 1), tmp_path, tokenizer, tokenizer.eos_token_id
    )
    loads = []
    real_load = policy._load
    monkeypatch.setattr(policy, "_load", lambda step: loads.append(step) or real_load(step))
    asked, result = [], []
    waiting = threading.Thread(
        target=lambda: result.append(policy.wait_for(0, lambda: asked.append(1) or len(asked) > 9)),
        daemon=True,
    )
    started = time.monotonic()
    waiting.start()
    waiting.join(WAIT_S)
    took = time.monotonic() - started
    assert result == [False] and len(asked) == 10
    assert len(loads) == 10 and took >= 9 * 0.05  # one load, one question, then a sleep


def test_loads_that_keep_failing_do_not_outlast_the_first_weights_timeout(
    tmp_path, tokenizer, unloadable, monkeypatch
):
    """The first wait's limit holds while loads fail, not only while nothing is published."""
    from trainspec.trainers.errors import SetupError
    from trainspec.trainers.orchestrator import policy as policy_module

    monkeypatch.setattr(policy_module, "LOAD_RETRY_S", 1000.0)
    monkeypatch.setattr(policy_module, "FIRST_WEIGHTS_S", 0.5)
    policy = policy_module.Policy(small_run(tmp_path, 1), tmp_path, tokenizer, 0)
    started = time.monotonic()
    with pytest.raises(SetupError) as caught:
        policy.wait_for(0, lambda: False, first=True)
    assert caught.value.path == "orchestrator.ckpt.wait_for_weights_timeout"
    assert time.monotonic() - started < WAIT_S


def test_a_broadcast_that_never_loads_stops_the_run_naming_it(
    tmp_path, tokenizer, unloadable, monkeypatch
):
    from trainspec.trainers.errors import RunError
    from trainspec.trainers.orchestrator import policy as policy_module

    monkeypatch.setattr(policy_module, "LOAD_RETRY_S", 0.2)
    policy = policy_module.Policy(small_run(tmp_path, 1), tmp_path, tokenizer, 0)
    with pytest.raises(RunError) as caught:
        policy.wait_for(0, lambda: False)
    assert caught.value.path == "orchestrator.weight_broadcast"
    assert f"step 0 ({unloadable}) did not load for 0 s" in caught.value.problem
