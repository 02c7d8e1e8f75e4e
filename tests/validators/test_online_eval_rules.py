"""The SFT online evals' rules (validators/online_evals.py): one test per rule outcome, and the
errors as validate-config shows them, at the file, line and column of what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainspec.config import ConfigError, load

SOURCE = {"env": {"taskset": {"id": "builtin:reverse-text"}}}
EVAL = {"source": [SOURCE]}


def with_eval(**top) -> dict:
    return {"eval": {**EVAL, **top.pop("eval", {})}, **top}


def test_resolve_inference_model_follows_model_name(outcome):
    config = outcome("sft", with_eval(model={"name": "org/m"}, inference={})).clean()
    assert config.inference.vllm.model == "org/m"
    assert "model" not in config.inference.vllm.model_fields_set  # resolved, not written


def test_validate_inference_needs_eval(outcome):
    out = outcome("sft", {"inference": {}})
    issue = out.only_error("validate_inference_needs_eval", "inference")
    assert "only to run the online evals" in issue.message


def test_resolve_eval_weight_broadcast_defaults_to_files(outcome):
    config = outcome("sft", with_eval(inference={})).clean()
    assert config.weight_broadcast.type == "filesystem"
    assert config.inference.weight_broadcast.type == "filesystem"
    assert outcome("sft", {}).clean().weight_broadcast is None  # no [eval]: nothing to feed


def test_resolve_eval_weight_broadcast_refuses_nixl(outcome):
    out = outcome("sft", with_eval(weight_broadcast={"type": "nixl"}))
    out.only_error("resolve_eval_weight_broadcast", "weight_broadcast.type")


def test_validate_eval_deployment_wants_the_servers_port(outcome):
    doc = with_eval(inference={"server": {"port": 8123}},
                    eval={"client": {"base_url": "http://localhost:9000/v1"}})  # fmt: skip
    issue = outcome("sft", doc).only_error("validate_eval_deployment", "eval.client.base_url")
    assert "inference.server.port = 8123" in issue.message


def test_resolve_eval_inference_points_the_client_at_the_server(outcome):
    doc = with_eval(inference={"router": "None", "server": {"port": 8123}},
                    deployment={"num_infer_gpus": 2})  # fmt: skip
    config = outcome("sft", doc).clean()
    assert config.eval.client.base_url == "http://localhost:8123/v1"
    assert config.inference.vllm.data_parallel_size == 2
    assert config.inference.vllm.api_server_count == 2


def test_validate_eval_sources_wants_distinct_names(outcome):
    out = outcome("sft", {"eval": {"source": [SOURCE, SOURCE]}})
    out.only_error("validate_eval_sources", "eval.source.1.name")


def test_validate_eval_concurrency_bounds(outcome):
    doc = with_eval(eval={"concurrency": {"max_inflight": 2, "initial_inflight": 4}})
    out = outcome("sft", doc)
    out.only_error("validate_eval_concurrency", "eval.concurrency.initial_inflight")


def errors_of(path: Path) -> list[str]:
    """The errors as validate-config prints them: where, the setting, what, the fix."""
    with pytest.raises(ConfigError) as caught:
        load("sft", [path])
    return [
        f"{issue.where}: error: {issue.path} {issue.message}\n    fix: {issue.fix}"
        for issue in caught.value.errors
    ]


def test_rule_errors_name_the_file_line_and_column(tmp_path):
    path = tmp_path / "evals.toml"
    path.write_text(
        "max_steps = 10\n"
        "\n"
        "[model]\n"
        'name = "org/a"\n'
        "\n"
        "[inference.vllm]\n"
        'model = "org/b"\n'
        "\n"
        "[eval]\n"
        "interval = 5\n"
        "\n"
        "[eval.client]\n"
        'base_url = "http://localhost:9000/v1"\n'
        "\n"
        "[[eval.source]]\n"
        'name = "rt"\n'
        'env.taskset.id = "builtin:reverse-text"\n'
        "\n"
        "[[eval.source]]\n"
        'name = "rt"\n'
        'env.taskset.id = "builtin:reverse-text"\n'
    )
    assert errors_of(path) == [
        f'{path}:7:9: error: inference.vllm.model = "org/b", but model.name = "org/a": the '
        "evals' server must load the model the run trains, to take its weights at each eval\n"
        "    fix: drop inference.vllm.model (it follows model.name)",
        f'{path}:13:12: error: eval.client.base_url = "http://localhost:9000/v1" is not on '
        "inference.server.port = 8000, where the server sft starts listens\n"
        "    fix: drop eval.client.base_url (it follows inference.server), or use that port",
        f"{path}:20:8: error: eval.source.1.name = 'rt' also names eval.source[0]\n"
        "    fix: give each source its own name",
    ]


def test_inference_without_eval_points_at_its_table(tmp_path):
    path = tmp_path / "infer.toml"
    path.write_text("max_steps = 10\n\n[inference]\n")
    (message,) = errors_of(path)
    assert message.startswith(f"{path}:3:2: error: inference is set without [eval]")
