"""The distillation algorithms and echo (learners.py, algorithms.py) on cases worked out by hand,
the frozen-model client (frozen.py) against a real served model, and the config rules that keep
a frozen sampling source with sft."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from trainspec.config import load
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.trainers.orchestrator.algorithms import (
    Signal,
    distill_advantages,
    echo_ce_weights,
)
from trainspec.trainers.orchestrator.environments.task import Prompt
from trainspec.trainers.orchestrator.learners import (
    Hinted,
    Imitated,
    Taught,
    build_learner,
    echo_alphas,
    hint_messages,
)
from trainspec.trainers.orchestrator.sampling.sampler import Completion

torch.set_num_threads(1)


def completion(ids: list[int], logprobs: list[float]) -> Completion:
    return Completion(ids, logprobs, "", True)


class FixedScorer:
    """A sampler whose score() answers fixed log-probabilities and records what it was asked."""

    def __init__(self, answers: list[list[float]]) -> None:
        self.answers = answers
        self.asked: list[tuple[list[list[int]], list[list[int]], float]] = []

    def score(self, prompts, completions, *, temperature):
        self.asked.append((prompts, completions, temperature))
        return self.answers

    def close(self) -> None:
        pass


def test_distill_advantage_is_teacher_minus_sampler_logprob():
    # tokens the teacher likes more than the sampler did get a positive advantage
    assert distill_advantages([-0.5, -2.0, -1.0], [-1.0, -1.5, -1.0]) == [0.5, -0.5, 0.0]
    with pytest.raises(ValueError, match="2 teacher log-probabilities for 1 tokens"):
        distill_advantages([-1.0, -1.0], [-1.0])


def test_echo_weights_env_tokens_after_the_first_reply():
    alphas = {"tool": 0.1, "user": 0.5}
    # a user turn before the first reply is the prompt's: weight 0
    segments = [("user", 2, False), ("assistant", 3, True), ("tool", 2, False),
                ("assistant", 1, True), ("user", 1, False), ("system", 2, False)]  # fmt: skip
    assert echo_ce_weights(segments, alphas) == [0, 0, 0, 0, 0, 0.1, 0.1, 0, 0.5, 0, 0]
    assert echo_ce_weights([("assistant", 4, True)], alphas) is None  # one turn: nothing


def test_echo_alphas_read_the_roles_that_are_set():
    config = load("orchestrator", [], {"algo": {"type": "echo", "roles": {"user": {}}}}).config
    assert echo_alphas(config.algo.roles) == {"user": 0.1}  # setting a role drops the default
    default = load("orchestrator", [], {"algo": {"type": "echo"}}).config
    assert echo_alphas(default.algo.roles) == {"tool": 0.1}


def test_opd_scores_the_policys_completion_on_the_teacher():
    teacher = FixedScorer([[-0.1, -0.2], [-3.0]])
    group = [completion([7, 8], [-0.5, -0.2]), completion([9], [-1.0])]
    signals = Taught(teacher).signals(Prompt([1, 2], "a"), group, [0.0, 1.0], None, 0.7)
    assert [s.token_advantages for s in signals] == [
        pytest.approx([0.4, 0.0]),
        pytest.approx([-2.0]),
    ]
    assert teacher.asked == [([[1, 2], [1, 2]], [[7, 8], [9]], 0.7)]
    assert all(s.advantage == 0.0 and s.ce_weights is None for s in signals)


def test_opsd_scores_after_the_filled_hint_on_the_live_policy():
    rendered: list[list[dict]] = []

    def render(messages):
        rendered.append(messages)
        return [100 + len(messages)]

    policy = FixedScorer([[-0.25]])
    hinted = Hinted(render, "Answer: {demonstration}!", "answer", "orchestrator.algo")
    prompt = Prompt([1], "olleh", messages=[{"role": "user", "content": "hello"}])
    (signal,) = hinted.signals(prompt, [completion([5], [-1.0])], [0.0], policy, 1.0)
    assert rendered == [
        [{"role": "system", "content": "Answer: olleh!"}, {"role": "user", "content": "hello"}]
    ]
    assert policy.asked == [([[102]], [[5]], 1.0)]
    assert signal.token_advantages == [0.75]


def test_opsd_takes_the_demonstration_from_a_data_column_and_names_a_missing_one():
    hinted = Hinted(lambda m: [1], "{demonstration}", "worked", "orchestrator.algo")
    assert hinted.demonstration(Prompt([1], "", {"worked": "2+2=4"})) == "2+2=4"
    with pytest.raises(SetupError) as caught:
        hinted.demonstration(Prompt([1], "", {"question": "q"}))
    assert caught.value.path == "orchestrator.algo.demo_key"
    assert "answer, question" in caught.value.problem


def test_hint_messages_put_the_template_first():
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"}]
    assert hint_messages("x {demonstration} y", 42, messages)[0] == {
        "role": "system",
        "content": "x 42 y",
    }
    assert hint_messages("t", 1, messages)[1:] == messages


def test_sft_learns_every_sampled_token_by_imitation():
    signals = Imitated(None).signals(
        Prompt([1], ""), [completion([4, 5, 6], [-1, -1, -1]), completion([], [])], [0, 0], None, 1
    )
    assert [s.ce_weights for s in signals] == [[1.0, 1.0, 1.0], []]
    assert signals[0].teaches and not Signal().teaches


# -- the frozen model, served for real -------------------------------------------------------


@pytest.fixture(scope="module")
def teacher(tiny_weights):
    from trainspec.trainers.orchestrator.sampling.model_server import ModelServer
    from trainspec.trainers.orchestrator.sampling.model_server import load as load_sampler

    out = tiny_weights(1)
    served = ModelServer(load_sampler(str(out), "cpu"), "teacher").start()
    yield served
    served.close()


@dataclass
class Context:
    tokenizer: object
    stop_id: int = 0
    render: object = None
    max_batch: int | None = None

    def renderer_for(self, cfg):
        return self.render


def algo(table: dict):
    return load("orchestrator", [], {"algo": table}).config.algo


def test_opd_with_a_served_teacher_scores_what_the_teacher_says(teacher, tokenizer):
    table = {"type": "opd", "teacher": {"name": "teacher", "base_url": teacher.base_url}}
    learner = build_learner(algo(table), "orchestrator.algo", "s", Context(tokenizer))
    try:
        assert isinstance(learner, Taught)
        prompt, ids = [3, 4, 5], [6, 7]
        (want,) = teacher.sampler.score([prompt], [ids], temperature=1.0)
        (signal,) = learner.signals(
            Prompt(prompt, ""), [completion(ids, [-1.0, -2.0])], [0], None, 1.0
        )
        assert signal.token_advantages == pytest.approx([want[0] + 1.0, want[1] + 2.0], abs=1e-5)
    finally:
        learner.close()


def test_sft_samples_from_the_frozen_model(teacher, tokenizer):
    source = {"name": "teacher", "base_url": teacher.base_url}
    table = {"type": "sft", "sampling": {"source": source}}
    learner = build_learner(algo(table), "orchestrator.algo", "s", Context(tokenizer))
    try:
        assert isinstance(learner, Imitated) and learner.sampler is not None
        (want,) = teacher.sampler.greedy([[3, 4, 5]], max_tokens=3)
        (got,) = learner.sampler.greedy([[3, 4, 5]], max_tokens=3)
        assert got.token_ids == want.token_ids
    finally:
        learner.close()


def test_a_teacher_serving_another_name_is_refused(teacher, tokenizer):
    table = {"type": "opd", "teacher": {"name": "Qwen/Qwen3-8B", "base_url": teacher.base_url}}
    with pytest.raises(SetupError) as caught:
        build_learner(algo(table), "orchestrator.algo", "s", Context(tokenizer))
    assert caught.value.path == "orchestrator.algo.teacher.name"
    assert "it serves 'teacher'" in caught.value.problem and "skip_model_check" in caught.value.fix
    table["teacher"]["skip_model_check"] = True
    build_learner(algo(table), "orchestrator.algo", "s", Context(tokenizer)).close()


def test_a_teacher_that_is_not_up_is_refused_after_its_timeout(tokenizer):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    teacher = {"name": "t", "base_url": f"http://127.0.0.1:{port}/v1", "wait_for_ready_timeout": 1}
    with pytest.raises(SetupError) as caught:
        build_learner(algo({"type": "opd", "teacher": teacher}), "orchestrator.algo", "s",
                      Context(tokenizer))  # fmt: skip
    assert caught.value.path == "orchestrator.algo.teacher.base_url"
    assert "was not ready within wait_for_ready_timeout = 1 s" in caught.value.problem
    assert "python -m trainspec.trainers.orchestrator.sampling.model_server" in caught.value.fix


def test_client_settings_a_frozen_model_cannot_use_are_refused_together(tokenizer, monkeypatch):
    monkeypatch.delenv("TRAINSPEC_NO_SUCH_VAR", raising=False)
    teacher = {
        "name": "t",
        "base_url": "http://127.0.0.1:9/v1",
        "extra_headers_from_state": {"X-Task": "task_id"},
        "admin_base_url": ["http://127.0.0.1:9/v1"],
        "headers_from_env": {"X-Token": "TRAINSPEC_NO_SUCH_VAR"},
    }
    with pytest.raises(SetupErrors) as caught:
        build_learner(algo({"type": "opd", "teacher": teacher}), "orchestrator.algo", "s",
                      Context(tokenizer))  # fmt: skip
    assert [e.path for e in caught.value.errors] == [
        "orchestrator.algo.teacher.extra_headers_from_state",
        "orchestrator.algo.teacher.admin_base_url",
        "orchestrator.algo.teacher.headers_from_env.X-Token",
    ]


def test_headers_reach_the_endpoint(tokenizer, monkeypatch, canned_server):
    url, seen = canned_server({"data": [{"id": "t"}]})
    monkeypatch.setenv("TRAINSPEC_TEST_TOKEN", "s3cret")
    monkeypatch.setenv("TRAINSPEC_TEST_KEY", "k")
    teacher = {
        "name": "t",
        "base_url": url,
        "api_key_var": "TRAINSPEC_TEST_KEY",
        "headers": {"X-Team": "rl"},
        "headers_from_env": {"X-Token": "TRAINSPEC_TEST_TOKEN"},
    }
    build_learner(algo({"type": "opd", "teacher": teacher}), "a", "s", Context(tokenizer)).close()
    assert seen[0]["X-Team"] == "rl" and seen[0]["X-Token"] == "s3cret"
    assert seen[0]["Authorization"] == "Bearer k"


def test_echo_with_a_filter_is_refused(tokenizer):
    echo = {"type": "echo", "filter": {"import_path": "my.keep"}}
    with pytest.raises(SetupError) as caught:
        build_learner(algo(echo), "orchestrator.algo", "s", Context(tokenizer))
    assert caught.value.path == "orchestrator.algo.filter"
    assert "narrows which environment tokens" in caught.value.problem


def test_a_served_teacher_at_a_temperature_other_than_1_is_refused_at_start(teacher, tokenizer):
    """A server's prompt_logprobs are unscaled (vLLM's, and the model server's alike): opd's
    advantages would compare them with log-probabilities sampled at 0.7."""
    from trainspec.trainers.orchestrator.sources import train_sources

    table = {"type": "opd", "teacher": {"name": "teacher", "base_url": teacher.base_url}}
    source = {"env": {"taskset": {"id": "builtin:reverse-text"}}}
    overrides = {"model.name": "builtin:tiny-qwen3", "algo": table, "train.source": [source]}
    for temperature, refused in ((0.7, True), (1.0, False)):
        config = load(
            "orchestrator", [], {**overrides, "train.sampling.temperature": temperature}
        ).config
        if not refused:
            for source in train_sources(config, tokenizer):
                source.learner.close()
            continue
        with pytest.raises(SetupError) as caught:
            train_sources(config, tokenizer)
        assert caught.value.path == "orchestrator.train.sampling.temperature"
        assert "= 0.7: orchestrator.algo scores tokens" in caught.value.problem
        assert "unscaled" in caught.value.problem and "temperature = 1.0" in caught.value.fix


def test_a_server_scores_at_temperature_1_only(teacher, tokenizer):
    from trainspec.trainers.orchestrator.sampling.openai_client import OpenAISampler

    sampler = OpenAISampler(
        teacher.base_url, "teacher", tokenizer, 0, field="orchestrator.algo.teacher"
    )
    try:
        with pytest.raises(SetupError) as caught:
            sampler.score([[3, 4, 5]], [[6, 7]], temperature=0.7)
        assert caught.value.path == "orchestrator.algo.teacher"
        (got,) = sampler.score([[3, 4, 5]], [[6, 7]], temperature=1.0)
        (want,) = teacher.sampler.score([[3, 4, 5]], [[6, 7]], temperature=1.0)
        assert got == pytest.approx(want, abs=1e-5)
    finally:
        sampler.close()
