"""Every leaf of the `eval` command's config counts: each is

* read by the command: real runs of `launch` through a recording proxy
  (tests/helpers/field_recorder.py): the built-in task and a source of your own data and reward
  through the in-process server, every key of each source written; the same through a server
  named by eval.client.base_url with every client setting written; a bare [inference] (no vLLM
  for the built-in model: served in process);
* or refused at start naming it (SetupError from `launch`, a refused table covering the keys
  under it);
* or a renderer or verifiers setting handed on with its table, as in the SFT proof
  (test_field_coverage.py), or the entrypoint's (dry_run).

    .venv/bin/python -m pytest tests/trainers/eval/test_eval_field_coverage.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.env_tables import handed_to_verifiers
from helpers.field_leaves import leaves_of
from helpers.field_recorder import FieldRecorder
from helpers.field_refusals import renderer_settings

from trainspec.config import load
from trainspec.config.schema_info import schema_info
from trainspec.trainers.errors import SetupError

SCHEMA = schema_info("eval")
LEAVES = leaves_of(SCHEMA)
ARITH = Path(__file__).resolve().parents[3] / "configs" / "rl" / "arith"
DATA = {"name": str(ARITH / "test.jsonl"), "prompt": "prompt", "split": "train",
        "subset": "None", "system_prompt": "Add."}  # fmt: skip
EVAL = {
    "num_examples": 2,
    "group_size": 1,
    "sampling": {"temperature": "None", "max_completion_tokens": 3},
    "env_server_base_port": 5000,
    "concurrency": {"max_inflight": 8},
    "source": [
        {
            "name": "rt",
            "env": {"taskset": {"id": "builtin:reverse-text", "split": "test"}},
            "num_examples": 2,
            "group_size": 2,
            "sampling": {"temperature": 1.0, "max_completion_tokens": 2},
        },
        {"name": "sums", "data": DATA, "reward": ["math_answer"], "reward_weights": [1.0]},
    ],
}
CLIENT = {"wait_for_ready_timeout": 60, "api_key_var": "TRAINSPEC_TEST_KEY",
          "headers": {"X-A": "1"}, "headers_from_env": {"X-B": "HOME"},
          "skip_model_check": False}  # fmt: skip
RUNS = {
    "in_process": {"eval": EVAL, "log": {"level": "info", "vf_level": "warning"}},
    "inference": {"eval": EVAL, "inference": {}},
}
# path the error names -> settings that ask for it
REFUSALS = {
    "eval.interval": {"interval": 3},
    "eval.skip_first_step": {"skip_first_step": True},
    "eval.retrigger_on_resume": {"retrigger_on_resume": True},
    "eval.sampling.top_p": {"sampling": {"top_p": 0.5}},
    "eval.sampling.top_k": {"sampling": {"top_k": 5}},
    "eval.sampling.min_p": {"sampling": {"min_p": 0.1}},
    "eval.sampling.reasoning_effort": {"sampling": {"reasoning_effort": "low"}},
    "eval.sampling.extra_body": {"sampling": {"extra_body": {"a": 1}}},
    "eval.concurrency.initial_inflight": {"concurrency": {"initial_inflight": 2}},
    "eval.concurrency.min_inflight": {"concurrency": {"min_inflight": 2, "max_inflight": 4}},
    "eval.env_server_base_port": {"env_server_base_port": 6000},
    "eval.client.extra_headers_from_state": {"client": {"extra_headers_from_state": {"X": "y"}}},
    "eval.client.admin_base_url": {"client": {"admin_base_url": ["http://127.0.0.1:1/v1"]}},
    "log.json_logging": {"log": {"json_logging": True}},
    "log.log_data": {"log": {"log_data": True}},
    "log.interval": {"log": {"interval": 5.0}},
    "log.ranks_filter": {"log": {"ranks_filter": [1]}},
    "inference": {"inference": {"vllm": {"gpu_memory_utilization": 0.5}}},
    "renderer.tool_parser": {"renderer": {"name": "default", "tool_parser": "hermes"}},
    "renderer.reasoning_parser": {"renderer": {"name": "default", "reasoning_parser": "think"}},
}
PER_SOURCE = {  # a source's own table: refused the same way, under eval.source[]
    "eval.source[].interval": {"interval": 3},
    "eval.source[].ratio": {"ratio": 0.5},
    "eval.source[].sampling.top_p": {"sampling": {"top_p": 0.5}},
    "eval.source[].sampling.top_k": {"sampling": {"top_k": 5}},
    "eval.source[].sampling.min_p": {"sampling": {"min_p": 0.1}},
    "eval.source[].sampling.reasoning_effort": {"sampling": {"reasoning_effort": "low"}},
    "eval.source[].sampling.extra_body": {"sampling": {"extra_body": {"a": 1}}},
}
ENTRYPOINT = {"dry_run": "the entrypoint prints the config and starts nothing"}
RENDERER_SETTINGS, CUSTOM_ONLY = renderer_settings()
VERIFIERS_SETTINGS = handed_to_verifiers("eval.source[]")


def config_of(tmp_path: Path, settings: dict):
    merged = {"model": "builtin:tiny-qwen3", "seq_len": 96, "output_dir": str(tmp_path),
              **settings}  # fmt: skip
    return load("eval", [], merged).config


@pytest.fixture(scope="module")
def consumed(tmp_path_factory):
    from trainspec.trainers.eval.main import launch
    from trainspec.trainers.orchestrator.sampling.local_model import local_model
    from trainspec.trainers.orchestrator.sampling.model_server import ModelServer

    recorder = FieldRecorder()
    for name, settings in RUNS.items():
        config = config_of(tmp_path_factory.mktemp(name), settings)
        assert launch(recorder.wrap(config)) == 0, name
    server = ModelServer(local_model("builtin:tiny-qwen3", "model"), "builtin:tiny-qwen3").start()
    try:
        client = {**CLIENT, "base_url": server.base_url}
        config = config_of(tmp_path_factory.mktemp("client"), {"eval": {**EVAL, "client": client}})
        assert launch(recorder.wrap(config)) == 0
    finally:
        server.close()
    return recorder


def refused_paths(tmp_path: Path, settings: dict) -> list[str]:
    from trainspec.trainers.eval.refusals import eval_refusals, unserved_inference_refusals

    config = config_of(tmp_path, settings)
    errors = eval_refusals(config)
    if config.inference is not None:
        errors += unserved_inference_refusals(config, "the built-in model has no weight files")
    assert all(isinstance(e, SetupError) and e.problem and e.fix for e in errors)
    return [e.path for e in errors]


def eval_with(table: dict) -> dict:
    return {**EVAL, **table, "sampling": {**EVAL["sampling"], **table.get("sampling", {})}}


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    out = {}
    for path, table in REFUSALS.items():
        top = path.split(".")[0]
        settings = {"eval": eval_with(table)} if top == "eval" else {"eval": EVAL, **table}
        out[path] = refused_paths(tmp_path_factory.mktemp("refused"), settings)
    for leaf, table in PER_SOURCE.items():
        first = {**EVAL["source"][0], **table}
        settings = {"eval": {**EVAL, "source": [first, EVAL["source"][1]]}}
        paths = refused_paths(tmp_path_factory.mktemp("refused"), settings)
        out[leaf] = [p.replace("eval.source[0]", "eval.source[]") for p in paths]
    return out


def how_consumed(leaf: str, consumed, refused) -> str | None:
    if consumed.readers(leaf):
        return "read by " + ", ".join(sorted(consumed.readers(leaf)))
    for path, named in refused.items():
        if path in named and (leaf == path or leaf.startswith(path + ".")):
            return f"refused with {path}"
    if leaf in RENDERER_SETTINGS:
        return f'handed to the renderers package (renderer.name = "{RENDERER_SETTINGS[leaf]}")'
    if leaf in CUSTOM_ONLY:
        return 'only under renderer.name = "custom", which is refused'
    table = ".".join(leaf.split(".")[:3])
    if leaf in VERIFIERS_SETTINGS and consumed.readers(table):
        return f"handed to verifiers with its table ({VERIFIERS_SETTINGS[leaf]})"
    return ENTRYPOINT.get(leaf)


def test_the_config_has_leaves():
    assert len(LEAVES) > 60
    assert {"model", "eval.client.base_url", "eval.source[].name", "inference.vllm.seed"} <= set(
        LEAVES
    )


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaf_is_consumed_or_refused(leaf, consumed, refused):
    assert how_consumed(leaf, consumed, refused), f"{leaf} is silently ignored"


@pytest.mark.parametrize("path", sorted({**REFUSALS, **PER_SOURCE}))
def test_refused_at_start_naming_the_setting(path, refused):
    assert path in refused[path], refused[path]


def test_a_custom_renderer_is_refused(tmp_path):
    renderer = {"name": "custom", "import_path": "my_renderers:Mine"}
    assert "renderer.name" in refused_paths(tmp_path, {"eval": EVAL, "renderer": renderer})


def test_a_dry_run_prints_the_config_and_evaluates_nothing(tmp_path, capsys):
    import json

    from trainspec.trainers.eval.main import main

    path = tmp_path / "evals.toml"
    path.write_text(
        f'model = "builtin:tiny-qwen3"\noutput_dir = "{tmp_path / "out"}"\n'
        '[[eval.source]]\nname = "rt"\nenv.taskset.id = "builtin:reverse-text"\n'
    )
    assert main([str(path), "--dry-run"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["dry_run"] is True and printed["model"] == "builtin:tiny-qwen3"
    assert not (tmp_path / "out").exists()
