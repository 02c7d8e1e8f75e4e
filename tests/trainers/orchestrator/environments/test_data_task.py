"""A source of your own data and reward functions (data_task.py): rows from a local file, the
prompt column or a conversation rendered with the chat template, every other column handed to
each reward, sync and async rewards weighted together, cut-off completions scoring 0, and the
errors naming the source's dotted path."""

from __future__ import annotations

import json

import pytest

from trainspec.config import load
from trainspec.trainers.chat.prompts import template_prompt_ids
from trainspec.trainers.errors import SetupError
from trainspec.trainers.orchestrator.sampling.sampler import Completion
from trainspec.trainers.orchestrator.sources import eval_sources, train_sources

REWARDS = """
import asyncio


def starts_right(completion, answer):
    return float(completion.startswith(answer[:1]))


async def short(completion, **row):
    await asyncio.sleep(0)
    assert row["level"] in (1, 2)  # every other column arrives
    return 1.0 if len(completion) <= 4 else 0.0
"""


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths start where rl runs
    rows = [
        {"question": "2+2", "answer": "4", "level": 1},
        {"question": "3+4", "answer": "7", "level": 2},
    ]
    (tmp_path / "arith.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    chats = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ih"}]}
    ]
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chats))
    (tmp_path / "my_rewards.py").write_text(REWARDS)
    return tmp_path


def source(**settings):
    data = {"name": "arith.jsonl", "prompt": "question", **settings.pop("data", {})}
    table = {"data": data, "reward": ["my_rewards.py:starts_right", "my_rewards.py:short"]}
    cfg = load("orchestrator", [], {"train.source": [{**table, **settings}]}).config
    return cfg


def done(text, finished=True):
    return Completion([1, 2], [0.0, 0.0], text, finished)


def test_rows_become_prompts_and_the_rewards_score_them(files, tokenizer):
    (built,) = train_sources(source(reward_weights=[1.0, 0.5]), tokenizer)
    task = built.task
    assert built.name == "arith.jsonl" and len(task) == 2
    first = task.first(1)[0]
    assert first.ids == template_prompt_ids(tokenizer, [{"role": "user", "content": "2+2"}])
    assert first.row == {"answer": "4", "level": 1}
    # starts_right (1.0) + 0.5 * short; a cut-off completion scores 0 whatever it says
    scores = task.score_group(first, [done("4"), done("4 is it"), done("5"), done("4", False)])
    assert scores == [1.5, 1.0, 0.5, 0.0]
    assert task.exact("4", first) is None  # your reward is the measure


def test_a_system_prompt_and_a_conversation_column(files, tokenizer):
    (built,) = train_sources(source(data={"system_prompt": "Add."}), tokenizer)
    first = built.task.first(1)[0]
    messages = [{"role": "system", "content": "Add."}, {"role": "user", "content": "2+2"}]
    assert first.ids == template_prompt_ids(tokenizer, messages)
    chats = load(
        "orchestrator",
        [],
        {"eval.source": [{"data": {"name": "chats.jsonl"}, "reward": ["exact_match"]}]},
    ).config
    (held_out,) = eval_sources(chats, tokenizer)
    prompt = held_out.task.first(-1)[0]
    assert prompt.ids == template_prompt_ids(tokenizer, [{"role": "user", "content": "hi"}])
    assert prompt.row == {"answer": "ih"}  # the last assistant message is the answer
    assert held_out.task.score_group(prompt, [done("ih"), done("hi")]) == [1.0, 0.0]


def test_mistakes_name_the_source(files, tokenizer):
    with pytest.raises(SetupError) as missing:
        train_sources(source(data={"prompt": "q"}), tokenizer)
    assert missing.value.path == "orchestrator.train.source[0].data.prompt"
    assert "question" in missing.value.problem  # the columns there are
    bad = load(
        "orchestrator",
        [],
        {"train.source": [{"data": {"name": "arith.jsonl", "prompt": "question"},
                           "reward": ["my_rewards.py:nope"]}]},
    ).config  # fmt: skip
    with pytest.raises(SetupError) as unknown:
        train_sources(bad, tokenizer)
    assert unknown.value.path == "orchestrator.train.source[0].reward[0]"
    assert "starts_right" in unknown.value.fix  # what the file defines


def test_a_reward_that_fails_on_a_completion_names_itself(files, tokenizer):
    (files / "my_rewards.py").write_text(REWARDS + "\n\ndef broken(completion):\n    return 'x'\n")
    cfg = load(
        "orchestrator",
        [],
        {"train.source": [{"data": {"name": "arith.jsonl", "prompt": "question"},
                           "reward": ["my_rewards.py:broken"]}]},
    ).config  # fmt: skip
    (built,) = train_sources(cfg, tokenizer)
    with pytest.raises(SetupError) as caught:
        built.task.score_group(built.task.first(1)[0], [done("4")])
    assert caught.value.path == "orchestrator.train.source[0].reward[0]"
