"""Environment servers the orchestrator starts itself (orchestrator/environments/env_servers.py):
a source whose serve table sizes a server plays its episodes on verifiers' own env server,
started in a process of its own, waited for, and stopped."""

from __future__ import annotations

import json
import socket
import stat

import pytest

pytest.importorskip("verifiers", reason="the envs extra: pip install 'trainspec[envs]'")

from helpers.ports import free_port
from test_verifiers_env import AGENT, PATH, TASKSET, env, play  # noqa: E402

from trainspec.trainers.errors import SetupError, SetupErrors  # noqa: E402
from trainspec.trainers.orchestrator.environments.env_servers import EnvServers  # noqa: E402
from trainspec.trainers.orchestrator.environments.verifiers_env import EnvTask  # noqa: E402

SOURCE = "orchestrator.train.source[0]"


def test_a_sized_serve_table_plays_on_a_server_started_for_the_source(
    policy, player, tmp_path, monkeypatch
):
    """A pool of two spawned workers, each episode bound per worker, for a taskset in a local
    file (imported in every worker): the episodes it plays at its address (as a source whose
    serve.address names a server plays them) are the ones played in the orchestrator, token
    for token, and close() stops it all."""
    (tmp_path / "short_tasks.py").write_text(TASKSET)
    monkeypatch.chdir(tmp_path)
    table = {"taskset": {"id": "short_tasks.py"}, "agent": AGENT}
    base = free_port()
    servers = EnvServers(tmp_path / "run", base_port=base - 3)  # source 3 of the run
    serve = {"pool": {"type": "static", "num_workers": 2}, "max_concurrent": 2}
    try:
        address = servers.start(table, serve, SOURCE, split="eval", index=3, name="short")
        served = EnvTask.from_env(table, PATH, player, seed=0, address=address)
        here = EnvTask.from_env(table, PATH, player, seed=0)
        remote = play(served, policy, served.first(1), n=2)  # an episode for each worker
        local = play(here, policy, here.first(1), n=2)
        (server,) = servers.servers
    finally:
        servers.close()
    assert address == f"tcp://127.0.0.1:{base}"
    spec = tmp_path / "run" / "envs" / "eval" / "short.json"
    assert stat.S_IMODE(spec.stat().st_mode) == 0o600  # the env's settings may hold secrets
    written = json.loads(spec.read_text())
    assert written["serve"]["pool"] == {"type": "static", "num_workers": 2}
    assert written["serve"]["max_concurrent"] == 2 and written["serve"]["address"] == address
    assert written["env"]["timeout"]["episode"] == 3600.0  # trainspec's bound reaches the server
    log = (tmp_path / "run" / "envs" / "eval" / "short.log").read_text()
    assert log.count("rollout done") == 2  # played there
    assert server.poll() is not None and not servers.servers
    for (group, rewards), (want, want_rewards) in zip(remote, local, strict=True):
        assert [c.prompt_ids for c in group] == [c.prompt_ids for c in want]
        assert [c.token_ids for c in group] == [c.token_ids for c in want]
        assert [c.mask for c in group] == [c.mask for c in want]
        assert [c.text for c in group] == ["x", "x"] and rewards == [1.0, 1.0]
        assert rewards == pytest.approx(want_rewards)


def test_a_server_that_cannot_start_is_named_with_its_log(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        servers = EnvServers(tmp_path, base_port=port)
        with pytest.raises(SetupError) as caught:
            servers.start(env(), {"max_concurrent": 1}, SOURCE, split="train", index=0,
                          name="rt")  # fmt: skip
        servers.close()
    error = caught.value
    assert error.path == f"{SOURCE}.serve" and "exited" in error.problem
    assert "Address already in use" in error.problem and "env_server_base_port" in error.fix


def test_the_serve_table_is_checked_by_verifiers_with_its_dotted_path(tmp_path):
    servers = EnvServers(tmp_path, base_port=free_port())
    with pytest.raises(SetupErrors) as caught:
        servers.start(env(), {"max_concurrent": 0, "pool": {"type": "static", "num_workers": 1}},
                      SOURCE, split="train", index=0, name="rt")  # fmt: skip
    (error,) = caught.value.errors
    assert error.path == f"{SOURCE}.serve.max_concurrent"
    assert "greater than or equal to 1" in str(error) and not servers.servers
