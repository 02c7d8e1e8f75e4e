"""The orchestrator's sources from [[orchestrator.train.source]] / [[orchestrator.eval.source]]:
what a source inherits from the group tables, how the sources of a step are picked, and what a
built-in taskset refuses, each with the source's dotted path."""

from __future__ import annotations

from collections import Counter

import pytest

from trainspec.config import dump_json, load
from trainspec.trainers.errors import SetupError, SetupErrors
from trainspec.trainers.orchestrator.sources import eval_sources, train_sources
from trainspec.trainers.orchestrator.step_batch import SourcePicker, TokenPicker

RT = {"taskset": {"id": "builtin:reverse-text"}}


def config(**settings):
    return load("orchestrator", [], settings).config


def refusals(build, *args, **kwargs) -> dict[str, str]:
    try:
        build(*args, **kwargs)
    except SetupError as err:
        return {err.path: err.problem}
    except SetupErrors as err:
        return {e.path: e.problem for e in err.errors}
    return {}


def test_a_source_takes_the_group_settings_it_does_not_set(tokenizer):
    cfg = config(
        group_size=4,
        algo={"type": "max_rl"},
        train={
            "sampling": {"temperature": 0.7, "max_completion_tokens": 12},
            "source": [
                {"name": "a", "env": RT},
                {"name": "b", "env": RT, "group_size": 2, "algo": {"type": "rae"},
                 "sampling": {"max_completion_tokens": 5}},
            ],
        },
    )  # fmt: skip
    a, b = train_sources(cfg, tokenizer)
    assert (a.group_size, a.sampling.temperature, a.sampling.max_tokens) == (4, 0.7, 12)
    assert (b.group_size, b.sampling.temperature, b.sampling.max_tokens) == (2, 0.7, 5)
    from trainspec.trainers.orchestrator.algorithms import Group

    assert a.learner.advantages(Group([1.0, 0.0])) == [1.0, -1.0]  # max_rl, the group's
    assert b.learner.advantages(Group([1.0], keys=[("b", "agent")])) == [1.0]  # rae, its own


def test_written_out_and_read_back_a_config_merges_the_same(tokenizer):
    """`rl` hands the orchestrator its config as JSON, where every key is written."""
    cfg = config(
        train={
            "sampling": {"max_completion_tokens": 12},
            "source": [{"env": RT, "sampling": {"temperature": 0.5}}],
        }
    )
    again = load("orchestrator", [], load_json(dump_json(cfg))).config
    for built in (train_sources(cfg, tokenizer), train_sources(again, tokenizer)):
        assert (built[0].sampling.temperature, built[0].sampling.max_tokens) == (0.5, 12)


def load_json(text: str) -> dict:
    import json

    return json.loads(text)


def test_eval_sources_take_the_eval_table_settings(tokenizer):
    cfg = config(
        eval={
            "interval": 7,
            "num_examples": 3,
            "sampling": {"max_completion_tokens": 9},
            "source": [{"env": RT}, {"name": "all", "env": RT, "num_examples": -1, "interval": 2}],
        }
    )
    first, every = eval_sources(cfg, tokenizer)
    assert (first.name, first.interval, first.num_examples, first.sampling.max_tokens) == (
        "builtin:reverse-text",
        7,
        3,
        9,
    )
    assert (every.interval, len(every.task.first(every.num_examples))) == (2, len(every.task))
    assert first.sampling.temperature is None  # greedy


def test_sources_are_picked_in_proportion_to_their_ratio(tokenizer):
    cfg = config(
        batch_size=8,
        group_size=2,
        train={"source": [{"name": "a", "env": RT, "ratio": 3}, {"name": "b", "env": RT}]},
    )
    sources = train_sources(cfg, tokenizer)
    picker = SourcePicker(sources, batch_size=8, seed=0)
    counts = Counter(index for step in range(200) for index, _ in picker.step(step))
    assert counts[0] + counts[1] == 200 * 4  # 4 prompts of 2 completions a step
    assert 0.70 < counts[0] / 800 < 0.80  # ratio 3:1


def test_a_step_is_the_same_however_the_run_got_there(tokenizer):
    cfg = config(
        batch_size=8,
        group_size=2,
        train={"source": [{"name": "a", "env": RT}, {"name": "b", "env": RT, "group_size": 4}]},
    )
    sources = train_sources(cfg, tokenizer)
    walked = SourcePicker(sources, 8, seed=1)
    steps = [walked.step(step) for step in range(6)]
    resumed = SourcePicker(sources, 8, seed=1)  # a resumed run starts at step 5
    assert resumed.step(5) == steps[5]
    for picks in steps:  # whole groups until the batch is full
        assert sum(sources[i].group_size for i, _ in picks) >= 8
    positions = [p for picks in steps for i, p in picks if i == 0]
    assert positions == list(range(len(positions)))  # each source walks its own prompts


def test_a_token_sized_step_resumes_from_its_written_counts(tokenizer, tmp_path):
    cfg = config(
        token_batch_size=256,
        train={"source": [{"name": "a", "env": RT, "ratio": 2}, {"name": "b", "env": RT}]},
    )
    sources = train_sources(cfg, tokenizer)
    record = tmp_path / "picks.jsonl"
    walked = TokenPicker(sources, seed=1, record=record, tokens=256)
    walked.resume(0)
    steps = []
    for step, rounds in enumerate([(3, 2), (5,), (1, 1, 4)]):  # rounds as the tokens needed
        walked.start(step)
        steps.append([pick for count in rounds for pick in walked.take(count)])
        walked.commit(step)
    resumed = TokenPicker(
        sources, seed=1, record=record, tokens=256
    )  # the trainer resumed at step 2
    resumed.resume(2)
    resumed.start(2)
    assert resumed.take(6) == steps[2]
    assert len(record.read_text().splitlines()) == 2  # the record ends where the run resumed
    fresh = TokenPicker(sources, seed=1, record=tmp_path / "elsewhere.jsonl", tokens=256)
    with pytest.raises(SetupError) as caught:
        fresh.resume(2)
    assert caught.value.path == "orchestrator.token_batch_size"
    assert "cannot be replayed" in caught.value.problem
    # a crash tore the line of step 2 as it was written: the resume at step 2 skips it
    with record.open("a") as file:
        file.write('{"step": 2, "us')
    torn = TokenPicker(sources, seed=1, record=record, tokens=256)
    torn.resume(2)
    torn.start(2)
    assert torn.take(6) == steps[2]
    assert record.read_text().endswith("}\n") and len(record.read_text().splitlines()) == 2


ALGOS = [
    {"type": "grpo", "length_penalty": {"type": "linear", "num_output_tokens_weight": 0.1}},
    {"type": "max_rl"},
    {"type": "rae", "decay": 0.5},
    {"type": "echo", "roles": {"user": {"alpha": 0.3}}},
    {"type": "opsd", "demo_key": "answer", "template": "Hint: {demonstration}"},
]


@pytest.mark.parametrize(
    "algo", [*ALGOS, "opd", "sft"], ids=[*(a["type"] for a in ALGOS), "opd", "sft"]
)
def test_a_sources_own_algo_table_reaches_the_same_builder(
    tokenizer, monkeypatch, canned_server, algo
):
    """What the field coverage counts on: a train source's algo table is handed to
    build_learner exactly as [orchestrator.algo] is, and builds the same learner."""
    from trainspec.trainers.orchestrator import sources as sources_module

    if algo in ("opd", "sft"):  # a frozen model: a server that lists it
        base_url, _ = canned_server({"object": "list", "data": [{"id": "teacher"}]})
        client = {"name": "teacher", "base_url": base_url, "headers": {"X-Team": "rl"}}
        algo = {"type": "opd", "teacher": client} if algo == "opd" else {
            "type": "sft", "sampling": {"source": client}}  # fmt: skip

    calls = []
    real = sources_module.build_learner

    def recording(table, path, name, context):
        learner = real(table, path, name, context)
        calls.append((table.model_dump(), type(learner), path))
        return learner

    monkeypatch.setattr(sources_module, "build_learner", recording)
    train_sources(config(algo=algo, train={"source": [{"env": RT}]}), tokenizer)
    train_sources(config(train={"source": [{"env": RT, "algo": algo}]}), tokenizer)
    (top, top_type, top_path), (own, own_type, own_path) = calls
    assert own == top and own_type is top_type
    assert (top_path, own_path) == ("orchestrator.algo", "orchestrator.train.source[0].algo")


def test_what_a_built_in_taskset_cannot_honour_is_refused_by_its_path(tokenizer):
    bash = {**RT, "agent": {"harness": {"id": "bash"}}, "id": "best-of-n"}
    turns = {"taskset": {"id": "builtin:reverse-text", "min_turns": 2}}
    served = {"name": "y", "env": turns, "curriculum": {}, "serve": {"address": "tcp://h:1"}}
    verifiers = {"env": {"taskset": {"id": "reverse-text"}}}
    # a server started elsewhere is sized where it starts
    sized = {"name": "z", "env": {"taskset": {"id": "reverse-text"}},
             "serve": {"address": "tcp://h:1", "pool": {"type": "static"}}}  # fmt: skip
    cfg = config(train={"source": [verifiers, {"name": "x", "env": bash}, served, sized]})
    found = refusals(train_sources, cfg, tokenizer)
    assert "verifiers" in found["orchestrator.train.source[0].env.taskset.id"]
    assert "one turn" in found["orchestrator.train.source[1].env.agent.harness"]
    assert "orchestrator.train.source[1].env.id" in found
    assert "orchestrator.train.source[2].env.taskset.min_turns" in found
    assert "orchestrator.train.source[2].curriculum" in found
    assert "orchestrator.train.source[2].serve.address" in found
    assert "started elsewhere" in found["orchestrator.train.source[3].serve.pool"]
    assert "orchestrator.train.source[3].serve.address" not in found


def test_a_serve_table_is_what_asks_for_a_server():
    """No serve table (null): the environment plays in the orchestrator; a table that names no
    address, even `serve = {}` (verifiers' defaults), has the orchestrator start one; an address
    names one started elsewhere. A built-in taskset has none: its serve table is refused."""
    from trainspec.trainers.orchestrator.environments.players import serve_refusals, starts_server

    env = {"taskset": {"id": "reverse-text"}}
    cfg = config(train={"source": [{"name": "a", "env": env},
                                   {"name": "b", "env": env, "serve": {}},
                                   {"name": "c", "env": env, "serve": {"address": "tcp://h:1"}},
                                   {"name": "d", "env": RT, "serve": {}}]})  # fmt: skip
    played, served, elsewhere, built_in = cfg.train.source
    assert [starts_server(s) for s in cfg.train.source] == [False, True, False, False]
    assert served.serve.pool.type == "elastic" and played.serve is None
    assert serve_refusals(elsewhere, "x") == [] and serve_refusals(served, "x") == []
    (refused,) = serve_refusals(built_in, "orchestrator.train.source[3]")
    assert refused.path == "orchestrator.train.source[3].serve"
    assert "only a verifiers environment is served" in refused.problem


def test_the_plain_chat_harness_is_a_built_in_taskset_s_own(tokenizer):
    agent = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}
    cfg = config(train={"source": [{"env": {**RT, "agent": agent}}]})
    (source,) = train_sources(cfg, tokenizer)
    assert source.name == "builtin:reverse-text"


def test_no_source_and_differing_temperatures_are_refused(tokenizer):
    assert "orchestrator.train.source" in refusals(train_sources, config(), tokenizer)
    two = config(
        train={
            "source": [{"name": "a", "env": RT}, {"name": "b", "env": RT,
                                                  "sampling": {"temperature": 0.5}}]
        }
    )  # fmt: skip
    assert "one" in refusals(train_sources, two, tokenizer)["orchestrator.train.source"]


def test_request_extras_are_refused_on_the_in_process_sampler(tokenizer):
    cfg = config(train={"source": [{"env": RT, "sampling": {"extra_body": {"top_k": 5}}}]})
    found = refusals(train_sources, cfg, tokenizer, local=True)
    assert "in-process" in found["orchestrator.train.source[0].sampling.extra_body"]
