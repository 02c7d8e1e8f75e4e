"""Sources that are verifiers environments (orchestrator/environments/verifiers_env.py), played for
real: the verifiers library's env, taskset, `null` harness (its chat program in a subprocess) and
train client, against the orchestrator's policy served on localhost. The policy is the scripted
checkpoint (conftest.py): it answers "x" and stops, so every token and reward is known."""

from __future__ import annotations

import pytest

pytest.importorskip("verifiers", reason="the envs extra: pip install 'trainspec[envs]'")

from trainspec.trainers.chat.prompts import template_prompt_ids, template_stop_id  # noqa: E402
from trainspec.trainers.chat.tasks import reverse_text  # noqa: E402
from trainspec.trainers.errors import SetupError, SetupErrors  # noqa: E402
from trainspec.trainers.orchestrator.algorithms import echo_ce_weights  # noqa: E402
from trainspec.trainers.orchestrator.environments.verifiers_env import EnvTask  # noqa: E402

PATH = "orchestrator.train.source[0].env"
AGENT = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}


def env(**taskset) -> dict:
    return {"taskset": {"id": "trainspec-reverse-text", **taskset}, "agent": AGENT}


def play(task, policy, prompts, n=1, temperature=1.0):
    return task.rollouts(prompts, n, policy, temperature=temperature, max_tokens=8, seed=0)


def test_an_episode_trains_on_the_policys_tokens_and_the_tasksets_reward(tokenizer, policy, player):
    task = EnvTask.from_env(env(), PATH, player, seed=0)
    prompts = task.first(2)
    played = play(task, policy, prompts, n=2)
    stop = template_stop_id(tokenizer)
    for prompt, (group, rewards) in zip(prompts, played, strict=True):
        (text,) = prompt.task.data.texts
        messages = [{"role": "system", "content": reverse_text.SYSTEM_PROMPT},
                    {"role": "user", "content": text}]  # fmt: skip
        assert len(group) == 2
        for completion, reward in zip(group, rewards, strict=True):
            # the prompt the built-in taskset trains on, to the token
            assert completion.prompt_ids == template_prompt_ids(tokenizer, messages)
            assert completion.token_ids == [tokenizer.encode("x")[-1], stop]
            assert completion.mask == [True, True] and completion.finished
            assert completion.logprobs == pytest.approx([0.0, 0.0], abs=1e-3)
            assert reward == pytest.approx(reverse_text.lcs_ratio("x", text[::-1]))


def test_a_multi_turn_episode_is_one_sample_with_the_users_turns_masked(tokenizer, policy, player):
    task = EnvTask.from_env(env(turns=2), PATH, player, seed=0)
    (prompt,) = task.first(1)
    [(group, rewards)] = play(task, policy, [prompt])
    (completion,) = group  # the history is prefix-true: one branch holds both turns
    x, stop = tokenizer.encode("x")[-1], template_stop_id(tokenizer)
    first, second = prompt.task.data.texts
    sampled = [t for t, m in zip(completion.token_ids, completion.mask, strict=True) if m]
    assert sampled == [x, stop, x, stop]
    between = [t for t, m in zip(completion.token_ids, completion.mask, strict=True) if not m]
    assert second in tokenizer.decode(between)  # the user's second turn, in context only
    assert completion.turns == 2
    assert rewards == [
        pytest.approx((reverse_text.lcs_ratio("x", first[::-1])
                       + reverse_text.lcs_ratio("x", second[::-1])) / 2)
    ]  # fmt: skip
    roles = [(role, generated) for role, _, generated in completion.segments]
    assert ("user", False) in roles and roles[0] == ("assistant", True)
    assert sum(count for _, count, _ in completion.segments) == len(completion.token_ids)
    # echo weighs the body of the user's turn after the first reply: not its role header,
    # not its end-of-turn token, and nothing the model sampled
    weights = echo_ce_weights(completion.segments, {"user": 0.5})
    assert weights is not None
    weighed = [t for t, w in zip(completion.token_ids, weights, strict=True) if w > 0]
    assert tokenizer.decode(weighed) == second
    assert all(w == 0 for w, m in zip(weights, completion.mask, strict=True) if m)


def test_the_env_table_is_checked_by_the_environment_with_its_dotted_path(player):
    with pytest.raises(SetupErrors) as caught:
        EnvTask.from_env(env(turns=0), PATH, player, seed=0)
    (error,) = caught.value.errors
    assert error.path == f"{PATH}.taskset.turns" and "greater than or equal to 1" in str(error)


def test_a_taskset_that_is_not_installed_is_named(player):
    with pytest.raises(SetupError) as caught:
        EnvTask.from_env({"taskset": {"id": "no-such-taskset"}}, PATH, player, seed=0)
    assert caught.value.path == f"{PATH}.taskset.id" and "no-such-taskset" in str(caught.value)


def test_without_verifiers_the_fix_is_the_envs_extra(player, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "verifiers.v1", None)  # what an import without it meets
    with pytest.raises(SetupError) as caught:
        EnvTask.from_env(env(), PATH, player, seed=0)
    assert caught.value.path == f"{PATH}.taskset.id" and "trainspec[envs]" in caught.value.fix


TASKSET = """
import verifiers.v1 as vf


class ShortTask(vf.Task[vf.TaskData]):
    @vf.reward(weight=1.0)
    async def short(self, trace: vf.Trace) -> float:
        return 1.0 / len(trace.last_reply)


class ShortTaskset(vf.Taskset[ShortTask, vf.TasksetConfig]):
    def load(self):
        for word in ("one", "two", "three"):
            yield ShortTask(vf.TaskData(prompt=word), self.config.task)


__all__ = ["ShortTaskset"]
"""


def test_a_taskset_in_a_local_file_runs_as_an_installed_one(policy, player, tmp_path, monkeypatch):
    (tmp_path / "short_tasks.py").write_text(TASKSET)
    monkeypatch.chdir(tmp_path)
    table = {"taskset": {"id": "short_tasks.py"}, "agent": AGENT}
    task = EnvTask.from_env(table, PATH, player, seed=0)
    assert len(task) == 3
    [(group, rewards)] = play(task, policy, task.first(1))
    assert group[0].text == "x" and rewards == [1.0]


def test_a_missing_local_taskset_file_is_named(player, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SetupError) as caught:
        EnvTask.from_env({"taskset": {"id": "mine.py"}}, PATH, player, seed=0)
    assert caught.value.path == f"{PATH}.taskset.id" and "no such file" in str(caught.value)


def test_when_every_episode_fails_the_step_stops_with_the_first_error(tokenizer, player):
    import socket

    from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = OpenAISampler(
        f"http://127.0.0.1:{port}/v1", "policy", tokenizer, template_stop_id(tokenizer)
    )
    task = EnvTask.from_env(env(), PATH, player, seed=0)
    with pytest.raises(SetupError) as caught:
        play(task, dead, task.first(1), n=2)
    assert caught.value.path == PATH and "every episode failed (2)" in str(caught.value)


HANGING_TASKSET = """
import asyncio
import verifiers.v1 as vf


class HangingTask(vf.Task[vf.TaskData]):
    async def setup(self, trace, runtime):
        await asyncio.sleep(3600)  # a harness that never comes back


class HangingTaskset(vf.Taskset[HangingTask, vf.TasksetConfig]):
    def load(self):
        yield HangingTask(vf.TaskData(prompt="one"), self.config.task)


__all__ = ["HangingTaskset"]
"""


def test_an_episode_past_its_deadline_fails_and_a_step_of_only_those_stops(
    policy, player, tmp_path, monkeypatch
):
    """env.timeout.episode bounds an episode that is alive but never ends: verifiers ends it
    at the deadline, trainspec leaves it out, and a step whose every episode ran out stops
    naming the deadline's setting (not a wait without end)."""
    from helpers.processes import outcome_within

    (tmp_path / "hanging_tasks.py").write_text(HANGING_TASKSET)
    monkeypatch.chdir(tmp_path)
    table = {"taskset": {"id": "hanging_tasks.py"}, "agent": AGENT, "timeout": {"episode": 2}}
    task = EnvTask.from_env(table, PATH, player, seed=0)
    error = outcome_within(lambda: play(task, policy, task.first(1), n=2), 240, "a hung episode")
    assert isinstance(error, SetupError) and "every episode failed (2)" in str(error), error
    assert "2s deadline (--env.timeout.episode)" in str(error)


def test_an_environment_source_refuses_opsd_naming_the_algo(tokenizer, player):
    from trainspec.config import load
    from trainspec.trainers.orchestrator.environments.players import Players
    from trainspec.trainers.orchestrator.sources import train_sources

    source = {"env": env()}
    algo = {"type": "opsd", "demo_key": "answer"}
    config = load(
        "orchestrator", [], {"model.name": "builtin:tiny-qwen3", "train.source": [source],
                             "algo": algo},
    ).config  # fmt: skip
    players = Players.of(config, tokenizer)
    players.player = player  # the module's player: one set of harness processes
    with pytest.raises(SetupError) as caught:
        train_sources(config, tokenizer, players=players)
    assert caught.value.path == "orchestrator.algo.type"
    assert "renders its own prompts" in caught.value.problem


def test_a_server_samplers_request_extras_reach_the_server(tokenizer, policy, player):
    """[orchestrator.train.sampling] extra_body goes with every turn of an episode: the served
    policy refuses a top_k it cannot honour, and the episodes fail saying so."""
    from trainspec.trainers.orchestrator.sampling.model_server import ModelServer
    from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler

    server = ModelServer(policy, "policy").start()
    try:
        served = OpenAISampler(
            server.base_url,
            "policy",
            tokenizer,
            template_stop_id(tokenizer),
            extra_body={"top_k": 5},
        )
        task = EnvTask.from_env(env(), PATH, player, seed=0)
        with pytest.raises(SetupError) as caught:
            play(task, served, task.first(1))
    finally:
        server.close()
    assert "top_k" in caught.value.problem
