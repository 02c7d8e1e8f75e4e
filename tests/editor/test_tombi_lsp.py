"""Completion, hover and diagnostics from the schema, through the real tombi language server."""

from __future__ import annotations

import json

import pytest
from helpers.support import ROOT

SHARED = set(json.loads((ROOT / "schema" / "base_trainer.json").read_text())["properties"])
RL_ONLY = set(
    json.loads((ROOT / "schema" / "rl_trainer.json").read_text())["allOf"][1]["properties"]
)
SFT_ONLY = set(
    json.loads((ROOT / "schema" / "sft_trainer.json").read_text())["allOf"][1]["properties"]
)
HEADER = {
    "rl": "#:schema ../../generated/schemas/rl_trainer.json\n",
    "sft": "#:schema ../../generated/schemas/sft_trainer.json\n",
    "rl_run": "#:schema ../../generated/schemas/rl.json\n",
}


def document(kind: str, body: str) -> tuple[str, str]:
    folder = {"rl_run": "rl"}.get(kind, kind)  # a directory that exists: tombi resolves from it
    return f"configs/{folder}/editor-test.toml", HEADER[kind] + body


def lines_of(found: list[tuple[int, str]]) -> set[int]:
    return {line for line, _ in found}


def flagged_deprecated(found: list[tuple[int, str]]) -> bool:
    return any(line == 2 and "deprecated" in message for line, message in found)


@pytest.mark.parametrize("kind", ["rl", "sft"])
async def test_top_level_completion_lists_the_keys_of_the_kind(editor, kind):
    uri = editor.open(*document(kind, "max_steps = 5\n\n"))
    own, other = (RL_ONLY, SFT_ONLY) if kind == "rl" else (SFT_ONLY, RL_ONLY)
    labels = await editor.completion(uri, 2, 0, expecting=(SHARED - {"max_steps"}) | own)
    assert "max_steps" not in labels  # already written
    assert SHARED - {"max_steps"} <= labels
    assert own <= labels
    only_other = other - own - SHARED
    assert not only_other & labels, sorted(only_other & labels)


async def test_completion_inside_model(editor):
    uri = editor.open(*document("rl", '[model]\nname = "x"\n\n'))
    expected = {"seq_len", "attn", "impl", "compile", "lora", "moe_router_dtype", "cp"}
    labels = await editor.completion(uri, 3, 0, expecting=expected)
    assert expected <= labels
    assert "max_steps" not in labels


@pytest.mark.parametrize(
    "body, present, absent",
    [
        ("[optim]\nlr = 1e-5\n\n", {"max_norm", "betas1", "betas2"}, {"momentum", "lr"}),
        ('[optim]\ntype = "sgd"\n\n', {"lr", "momentum", "nesterov"}, {"betas1", "mu"}),
        ('[optim]\ntype = "muon"\n\n', {"mu", "betas1", "betas2"}, {"nesterov"}),
        ('[scheduler]\ntype = "linear"\n\n', {"warmup_steps", "decay_steps", "min_lr"}, set()),
        ('[scheduler]\ntype = "cosine"\n\n', {"warmup_steps", "min_lr"}, {"decay_steps"}),
    ],
)
async def test_completion_follows_the_variant_type(editor, body, present, absent):
    uri = editor.open(*document("sft", body))
    labels = await editor.completion(uri, body.count("\n") + 1, 0, expecting=present)
    assert present <= labels
    assert not absent & labels


TRAIN = '[[orchestrator.train.source]]\nenv.taskset.id = "reverse-text"\n'
EVAL = '[[orchestrator.eval.source]]\nenv.taskset.id = "reverse-text"\n'


@pytest.mark.parametrize(
    "kind, body, present, absent",
    [
        ("rl_run", TRAIN + "[orchestrator.train.source.env.timeout]\n\n",
         {"episode", "finalize"}, {"setup"}),
        ("rl_run", '[[orchestrator.train.source]]\n[orchestrator.train.source.env]\n'
         'taskset.id = "reverse-text"\n\n',
         {"id", "timeout", "retries", "max_concurrent_agents", "interception", "agent"}, set()),
        ("rl_run", TRAIN + "[orchestrator.train.source.serve]\n\n",
         {"pool", "address", "max_concurrent"}, set()),
        ("rl_run", TRAIN + '[orchestrator.train.source.serve.pool]\ntype = "static"\n\n',
         {"num_workers"}, {"max_workers", "multiplex"}),
        ("rl_run", EVAL + '[orchestrator.eval.source.env.agent.runtime]\ntype = "modal"\n\n',
         {"vm", "network_access", "creates_per_sec"}, {"labels", "checkpoint"}),
        ("rl_run", EVAL + "[orchestrator.eval.source.env.agent]\n\n",
         {"harness", "runtime", "max_turns", "sampling", "client", "network_notice"}, set()),
        ("rl_run", EVAL + "[orchestrator.eval.source.env.retries]\n\n",
         {"max_retries", "rules"}, set()),
        ("sft", '[[eval.source]]\nenv.taskset.id = "reverse-text"\n[eval.source.env.taskset]\n\n',
         {"system_prompt", "task"}, set()),
        ("sft", '[[eval.source]]\nenv.taskset.id = "x"\n[eval.source.env.interception]\n\n',
         {"multiplex"}, set()),
    ],
    ids=["env.timeout", "env", "serve", "serve.pool static", "agent.runtime modal", "env.agent",
         "env.retries", "sft env.taskset", "sft env.interception"],
)  # fmt: skip
async def test_completion_inside_a_sources_env_and_serve_tables(
    editor, kind, body, present, absent
):
    uri = editor.open(*document(kind, body))
    labels = await editor.completion(uri, body.count("\n") + 1, 0, expecting=present)
    assert present <= labels, sorted(labels)
    assert not absent & labels, sorted(absent & labels)


async def test_a_typo_in_an_env_table_is_flagged_on_its_line(editor):
    body = TRAIN + "env.timeout.episod = 30\nserve.max_concurent = 2\n"
    uri = editor.open(*document("rl_run", body))
    found = await editor.diagnostics(uri, expecting=lambda found: {3, 4} <= lines_of(found))
    assert {3, 4} <= lines_of(found), found
    assert any("episod" in message for line, message in found if line == 3), found


async def test_hover_shows_description_and_default(editor):
    uri = editor.open(*document("rl", '[model]\nseq_len = 4096\nmoe_router_dtype = "auto"\n'))
    seq_len = "Maximum number of tokens in one training sequence."
    text = await editor.hover(uri, 2, 2, expecting=seq_len)
    assert seq_len in text
    assert "Default: `2048`" in text
    auto = '"auto" becomes float32 for RL and bfloat16 for SFT'
    text = await editor.hover(uri, 3, 2, expecting=auto)
    assert auto in text


async def test_hover_on_an_enum_value_documents_it(editor):
    uri = editor.open(*document("rl", '[model]\nattn = "flash_attention_3"\n'))
    text = await editor.hover(uri, 2, 10, expecting="FlashAttention 3")
    assert text.startswith("FlashAttention 3 (Hopper GPUs).")  # the value's own description
    assert 'Default: `"auto"`' in text


async def test_a_renamed_key_is_flagged_as_deprecated(editor):
    uri = editor.open(*document("sft", "[deployment]\nnum_eval_gpus = 2\n"))
    found = await editor.diagnostics(uri, expecting=flagged_deprecated)
    assert flagged_deprecated(found), found


async def test_unknown_key_and_wrong_type_are_flagged_on_their_lines(editor):
    uri = editor.open(*document("rl", 'max_steps = "ten"\n\n[model]\nseq_len = 4096\nbogus = 1\n'))
    found = await editor.diagnostics(uri, expecting=lambda found: {1, 5} <= lines_of(found))
    lines = lines_of(found)
    assert 1 in lines  # max_steps = "ten"
    assert 5 in lines  # bogus = 1
    assert any("bogus" in message for line, message in found if line == 5)
    assert 4 not in lines  # seq_len is fine


async def test_per_key_limits_are_flagged_and_rules_between_keys_are_not(editor):
    """The schema states what one key may hold (a bound, a pattern): editors flag it. Rules
    between keys live in the validators only (tombi could not name them or their fix), so a
    trace with max_steps = 50 is left to validate-config."""
    text = (
        'trace_path = "trace.json"\nmax_steps = 50\n'
        '[optim]\nbetas1 = 1.0\n[resume]\ndir = "runs/a/latest"\n'
    )
    uri = editor.open(*document("rl", text))
    found = await editor.diagnostics(uri, expecting=lambda found: {4, 6} <= lines_of(found))
    lines = lines_of(found)
    assert {4, 6} <= lines, found  # betas1 below 1, resume.dir a step_<N> directory
    assert not {1, 2} & lines, found
