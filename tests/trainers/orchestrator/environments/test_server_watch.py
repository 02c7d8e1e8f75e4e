"""An environment server that is gone while the orchestrator plays on it
(orchestrator/environments/server_watch.py): verifiers' client would wait for its episodes
forever; the step fails instead with an error naming the source's serve table and how the
server ended. Real servers (verifiers' env server in a process of its own), real sockets."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytest.importorskip("verifiers", reason="the envs extra: pip install 'trainspec[envs]'")

from helpers.ports import free_port  # noqa: E402
from helpers.processes import outcome_within  # noqa: E402
from test_verifiers_env import env, play  # noqa: E402

from trainspec.config import load  # noqa: E402
from trainspec.trainers.errors import RunError  # noqa: E402
from trainspec.trainers.orchestrator.environments.players import Players  # noqa: E402
from trainspec.trainers.orchestrator.environments.verifiers_env import EnvTask  # noqa: E402

SOURCE = "orchestrator.train.source[0]"
WAIT_S = 240  # a busy 2-core machine; before the fix the play never ended at all


def served_source(tmp_path, tokenizer):
    """An orchestrator's one train source, played on an environment server of its own; with
    the Players that start it."""
    config = load(
        "orchestrator",
        [],
        {
            "output_dir": str(tmp_path / "run"),
            "env_server_base_port": free_port(),
            "train.source": [{"env": env(), "serve": {"max_concurrent": 1}}],
        },
    ).config
    (source,) = config.train.source
    return source, Players.of(config, tokenizer)


def test_a_server_that_crashed_fails_the_step_naming_the_source_and_its_exit(
    tmp_path, tokenizer, policy
):
    source, players = served_source(tmp_path, tokenizer)
    try:
        address = players.serve(source, SOURCE, split="train", index=0)
        task = EnvTask.from_env(env(), f"{SOURCE}.env", players.get(), seed=0, address=address)
        assert play(task, policy, task.first(1))  # it plays while it lives
        (server,) = players.servers.servers
        os.killpg(server.process.pid, signal.SIGKILL)  # the server crashes, its pool with it
        error = outcome_within(lambda: play(task, policy, task.first(1)), WAIT_S, "a dead server")
    finally:
        started = time.monotonic()
        players.close()
        assert time.monotonic() - started < WAIT_S
    assert isinstance(error, RunError), error
    assert error.path == f"{SOURCE}.serve"
    assert address in error.problem and "killed by SIGKILL" in error.problem
    assert "relaunch" in error.fix


@pytest.mark.parametrize("started_here", [False, True], ids=["serve.address", "started-here"])
def test_a_server_that_stops_answering_fails_the_step_naming_its_address(
    tmp_path, tokenizer, policy, monkeypatch, started_here
):
    """A server that hangs, stopped with SIGSTOP: alive, holding its port, answering nothing
    (its own episode deadline runs inside it, so it cannot help). Whether the orchestrator
    started it or it runs elsewhere (`serve.address`: only its health can be asked), once it has
    answered no health check for SILENT_S the step fails naming the address."""
    from trainspec.trainers.orchestrator.environments import server_watch

    monkeypatch.setattr(server_watch, "HEALTH_S", 0.5)
    monkeypatch.setattr(server_watch, "HEALTH_TIMEOUT_S", 1.0)
    monkeypatch.setattr(server_watch, "SILENT_S", 5.0)
    source, players = served_source(tmp_path, tokenizer)
    stopped = None
    try:
        address = players.serve(source, SOURCE, split="train", index=0)
        if not started_here:  # as for a server started elsewhere: no process to look at
            players.get().exited.pop(address)
        task = EnvTask.from_env(env(), f"{SOURCE}.env", players.get(), seed=0, address=address)
        assert play(task, policy, task.first(1))  # it plays while it answers
        (server,) = players.servers.servers
        stopped = server.process.pid
        os.killpg(stopped, signal.SIGSTOP)  # hung: its port open, nothing answered
        error = outcome_within(lambda: play(task, policy, task.first(1)), WAIT_S, "a hung server")
    finally:
        if stopped is not None:
            os.killpg(stopped, signal.SIGCONT)
        players.close()
    assert isinstance(error, RunError), error
    assert address in error.problem and "has answered no health check" in error.problem
    assert "start it again" in error.fix or "its log" in error.fix
