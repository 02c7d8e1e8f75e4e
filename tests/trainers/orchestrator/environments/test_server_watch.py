"""An environment server that is gone while the orchestrator plays on it
(orchestrator/environments/server_watch.py): verifiers' client would wait for its episodes
forever; the step fails instead with an error naming the source's serve table and how the
server ended. Real servers (verifiers' env server in a process of its own), real sockets."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

pytest.importorskip("verifiers", reason="the envs extra: pip install 'trainspec[envs]'")

from helpers.ports import free_port  # noqa: E402
from test_verifiers_env import env, play  # noqa: E402

from trainspec.config import load  # noqa: E402
from trainspec.trainers.errors import RunError  # noqa: E402
from trainspec.trainers.orchestrator.environments.players import Players  # noqa: E402
from trainspec.trainers.orchestrator.environments.verifiers_env import EnvTask  # noqa: E402

SOURCE = "orchestrator.train.source[0]"
WAIT_S = 240  # a busy 2-core machine; before the fix the play never ended at all


def test_a_server_that_crashed_fails_the_step_naming_the_source_and_its_exit(
    tmp_path, tokenizer, policy
):
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
    players = Players.of(config, tokenizer)
    outcome: list = []
    try:
        address = players.serve(source, SOURCE, split="train", index=0)
        task = EnvTask.from_env(env(), f"{SOURCE}.env", players.get(), seed=0, address=address)
        assert play(task, policy, task.first(1))  # it plays while it lives
        (server,) = players.servers.servers
        os.killpg(server.process.pid, signal.SIGKILL)  # the server crashes, its pool with it

        def again() -> None:
            try:
                outcome.append(play(task, policy, task.first(1)))
            except BaseException as exc:  # noqa: BLE001 (what the step raised is the result)
                outcome.append(exc)

        playing = threading.Thread(target=again, daemon=True)
        playing.start()
        playing.join(WAIT_S)
        assert not playing.is_alive(), "the orchestrator still waits on a dead server"
    finally:
        started = time.monotonic()
        players.close()
        assert time.monotonic() - started < WAIT_S
    (error,) = outcome
    assert isinstance(error, RunError), error
    assert error.path == f"{SOURCE}.serve"
    assert address in error.problem and "killed by SIGKILL" in error.problem
    assert "relaunch" in error.fix
