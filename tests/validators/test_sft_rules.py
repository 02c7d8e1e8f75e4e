"""SFT_RULES: one test per outcome of every rule of the SFT trainer."""

from __future__ import annotations

import re

import pytest

from trainspec.validators.sft import SFT_RULES, config_digest

VLM_MODEL = {
    "impl": "custom",
    "vlm": {"vision_encoder_attr": "model.visual", "language_model_attr": "model.language_model"},
    "optimization_dtype": "bfloat16",
    "reduce_dtype": "bfloat16",
}
MULTI_NODE = {"type": "multi_node", "num_train_nodes": 4}

# The data tables a rule checks: the training data and the validation data.
data_paths = pytest.mark.parametrize("path", ["data", "val.data"])


def with_data(path: str, **fields) -> dict:
    """A document whose table at `path` ("data" or "val.data") has `fields`."""
    if path == "data":
        return {"data": fields}
    return {"val": {"data": fields}}


def test_sft_rules_are_the_documented_ones():
    assert [rule.__name__ for rule in SFT_RULES] == [
        "validate_batch_size",
        "validate_subsets_and_splits",
        "validate_gpu_count",
        "resolve_inference_model",
        "validate_inference_needs_eval",
        "resolve_eval_weight_broadcast",
        "validate_eval_deployment",
        "resolve_eval_inference",
        "validate_eval_sources",
        "validate_eval_concurrency",
        "validate_cp_seq_len",
        "validate_cp_micro_batch_size",
        "validate_vlm_constraints",
        "resolve_dp_replicate_from_deployment",
        "resolve_run_name",
        "run_dir_is_one_name",
        "sbatch_values_are_words",
    ]


# --- validate_batch_size -------------------------------------------------------------------------


@data_paths
def test_validate_batch_size_rejects_non_multiple(path, outcome):
    out = outcome("sft", with_data(path, batch_size=10, micro_batch_size=4))
    issue = out.only_error("validate_batch_size", f"{path}.batch_size")
    assert "= 10" in issue.message
    assert f"{path}.micro_batch_size = 4" in issue.message


def test_validate_batch_size_reports_training_and_validation_data(outcome):
    doc = {
        "data": {"batch_size": 10, "micro_batch_size": 4},
        "val": {"data": {"batch_size": 9, "micro_batch_size": 2}},
    }
    assert outcome("sft", doc).error_keys == [
        ("validate_batch_size", "data.batch_size"),
        ("validate_batch_size", "val.data.batch_size"),
    ]


@pytest.mark.parametrize(
    "doc",
    [
        {"data": {"batch_size": 128, "micro_batch_size": 4}},
        {"data": {"type": "fake", "batch_size": 12, "micro_batch_size": 3}},
        {"val": {"data": {"batch_size": 8, "micro_batch_size": 8}}},
        {},
    ],
    ids=["data", "fake", "val", "defaults"],
)
def test_validate_batch_size_leaves_multiples_alone(doc, outcome):
    config = outcome("sft", doc).clean()
    assert config.data.batch_size % config.data.micro_batch_size == 0


# --- validate_subsets_and_splits -----------------------------------------------------------------


@data_paths
def test_validate_subsets_and_splits_rejects_split_count(path, outcome):
    out = outcome("sft", with_data(path, subsets=["a", "b"], splits=["train"]))
    issue = out.only_error("validate_subsets_and_splits", f"{path}.splits")
    assert "has 1 entries" in issue.message
    assert f"{path}.subsets has 2" in issue.message


@data_paths
@pytest.mark.parametrize("name", ["subsets", "splits"])
def test_validate_subsets_and_splits_rejects_probability_count(path, name, outcome):
    doc = with_data(path, **{name: ["a", "b"]}, probabilities=[0.2, 0.3, 0.5])
    issue = outcome("sft", doc).only_error("validate_subsets_and_splits", f"{path}.probabilities")
    assert "has 3 entries" in issue.message
    assert f"{path}.{name} has 2" in issue.message


def test_validate_subsets_and_splits_checks_probabilities_against_both_lists(outcome):
    doc = {"data": {"subsets": ["a", "b"], "splits": ["x", "y"], "probabilities": [1.0]}}
    out = outcome("sft", doc)
    assert out.error_keys == [
        ("validate_subsets_and_splits", "data.probabilities"),
        ("validate_subsets_and_splits", "data.probabilities"),
    ]
    assert "data.subsets has 2" in out.errors[0].message
    assert "data.splits has 2" in out.errors[1].message


@data_paths
@pytest.mark.parametrize(
    "fields",
    [
        {"subsets": ["a", "b"], "splits": ["x", "y"], "probabilities": [0.5, 0.5]},
        {"subsets": ["a", "b", "c"]},
        {"splits": ["x", "y"], "probabilities": [0.1, 0.9]},
        {"probabilities": [0.1, 0.9]},
        {},
    ],
    ids=["all-match", "subsets-only", "splits-probabilities", "probabilities-only", "none"],
)
def test_validate_subsets_and_splits_leaves_matching_lists_alone(path, fields, outcome):
    config = outcome("sft", with_data(path, **fields)).clean()
    data = config.data if path == "data" else config.val.data
    for key, value in fields.items():
        assert getattr(data, key) == value


def test_validate_subsets_and_splits_skips_fake_data(outcome):
    config = outcome("sft", {"data": {"type": "fake"}}).clean()
    assert config.data.type == "fake"


# --- validate_gpu_count --------------------------------------------------------------------------


def test_validate_gpu_count_rejects_more_gpus_than_the_node_has(outcome):
    doc = {"deployment": {"gpus_per_node": 8, "num_train_gpus": 9}}
    issue = outcome("sft", doc).only_error("validate_gpu_count", "deployment.num_train_gpus")
    assert "= 9" in issue.message
    assert "deployment.gpus_per_node = 8" in issue.message


@pytest.mark.parametrize(
    "deployment",
    [
        {"gpus_per_node": 8, "num_train_gpus": 8},
        {"gpus_per_node": 4, "num_train_gpus": 1},
        {"type": "multi_node", "gpus_per_node": 2},
    ],
    ids=["full-node", "one-gpu", "multi-node"],
)
def test_validate_gpu_count_leaves_fitting_layouts_alone(deployment, outcome):
    config = outcome("sft", {"deployment": deployment}).clean()
    assert config.deployment.gpus_per_node == deployment["gpus_per_node"]


# --- validate_cp_seq_len -------------------------------------------------------------------------


@data_paths
def test_validate_cp_seq_len_rejects_indivisible_seq_len(path, outcome):
    doc = {"model": {"cp": 4}, **with_data(path, seq_len=130)}
    if path == "val.data":
        doc["data"] = {"seq_len": 128}
    issue = outcome("sft", doc).only_error("validate_cp_seq_len", f"{path}.seq_len")
    assert "= 130" in issue.message
    assert "model.cp = 4" in issue.message


@pytest.mark.parametrize(("cp", "seq_len"), [(2, 128), (4, 256), (1, 127)])
def test_validate_cp_seq_len_leaves_divisible_seq_len_alone(cp, seq_len, outcome):
    config = outcome("sft", {"model": {"cp": cp}, "data": {"seq_len": seq_len}}).clean()
    assert (config.model.cp, config.data.seq_len) == (cp, seq_len)


def test_validate_cp_seq_len_is_sft_only(outcome):
    config = outcome("rl", {"model": {"cp": 3}}).clean()
    assert config.model.cp == 3


# --- validate_cp_micro_batch_size ----------------------------------------------------------------


@data_paths
def test_validate_cp_micro_batch_size_rejects_micro_batches(path, outcome):
    doc = {"model": {"cp": 2}, **with_data(path, micro_batch_size=2)}
    issue = outcome("sft", doc).only_error(
        "validate_cp_micro_batch_size", f"{path}.micro_batch_size"
    )
    assert "got 2" in issue.message
    assert "model.cp = 2" in issue.message


@pytest.mark.parametrize(("cp", "micro"), [(2, 1), (1, 4)])
def test_validate_cp_micro_batch_size_leaves_valid_pairs_alone(cp, micro, outcome):
    config = outcome("sft", {"model": {"cp": cp}, "data": {"micro_batch_size": micro}}).clean()
    assert config.data.micro_batch_size == micro


# --- validate_vlm_constraints --------------------------------------------------------------------


@data_paths
def test_validate_vlm_constraints_rejects_micro_batches(path, outcome):
    doc = {"model": VLM_MODEL, **with_data(path, micro_batch_size=4)}
    issue = outcome("sft", doc).only_error("validate_vlm_constraints", f"{path}.micro_batch_size")
    assert "got 4" in issue.message
    assert "[model.vlm]" in issue.message


@pytest.mark.parametrize(("model", "micro"), [(VLM_MODEL, 1), ({}, 4)], ids=["vlm", "text"])
def test_validate_vlm_constraints_leaves_valid_pairs_alone(model, micro, outcome):
    config = outcome("sft", {"model": model, "data": {"micro_batch_size": micro}}).clean()
    assert config.data.micro_batch_size == micro


# --- resolve_dp_replicate_from_deployment --------------------------------------------------------


def test_resolve_dp_replicate_from_deployment_rejects_indivisible_node_groups(outcome):
    doc = {"deployment": {**MULTI_NODE, "nodes_per_fsdp_group": 3}}
    issue = outcome("sft", doc).only_error(
        "resolve_dp_replicate_from_deployment", "deployment.nodes_per_fsdp_group"
    )
    assert "= 3" in issue.message
    assert "deployment.num_train_nodes = 4" in issue.message


def test_resolve_dp_replicate_from_deployment_sets_default_dp_replicate_silently(outcome):
    doc = {"deployment": {**MULTI_NODE, "nodes_per_fsdp_group": 2}}
    out = outcome("sft", doc)
    config = out.clean()
    assert "resolve_dp_replicate_from_deployment" not in {issue.rule for issue in out.warnings}
    assert config.model.dp_replicate == 2


def test_resolve_dp_replicate_from_deployment_overrides_explicit_dp_replicate_with_warning(outcome):
    doc = {"model": {"dp_replicate": 3}, "deployment": {**MULTI_NODE, "nodes_per_fsdp_group": 1}}
    out = outcome("sft", doc)
    issue = out.only_warning("resolve_dp_replicate_from_deployment", "model.dp_replicate")
    assert issue.message.startswith("set to 4 (was 3)")
    assert "deployment.num_train_nodes / deployment.nodes_per_fsdp_group = 4" in issue.message
    assert out.config.model.dp_replicate == 4


@pytest.mark.parametrize(
    ("dp_replicate", "deployment"),
    [
        (2, {**MULTI_NODE, "nodes_per_fsdp_group": 2}),
        (3, {**MULTI_NODE}),
        (3, {**MULTI_NODE, "nodes_per_fsdp_group": "None"}),
        (3, {}),
    ],
    ids=["matching", "no-group", "group-null", "single-node"],
)
def test_resolve_dp_replicate_from_deployment_leaves_dp_replicate_alone(
    dp_replicate, deployment, outcome
):
    doc = {"model": {"dp_replicate": dp_replicate}, "deployment": deployment}
    config = outcome("sft", doc).clean()
    assert config.model.dp_replicate == dp_replicate


# --- resolve_run_name ----------------------------------------------------------------------------


def test_resolve_run_name_derives_name_and_dir(outcome):
    out = outcome("sft", {})
    config = out.clean()
    assert "resolve_run_name" not in {issue.rule for issue in out.warnings}
    assert re.fullmatch(r"reverse-text-sft--qwen3-0\.6b--[0-9a-f]{8}", config.run.name)
    assert config.run.name.endswith(f"--{config_digest(config)}")
    assert config.run.dir == config.run.name


def test_resolve_run_name_lowercases_last_path_parts(outcome):
    doc = {"model": {"name": "/models/Org/My-Model/"}, "data": {"name": "data/My_Chats.jsonl"}}
    config = outcome("sft", doc).clean()
    assert re.fullmatch(r"my_chats\.jsonl--my-model--[0-9a-f]{8}", config.run.name)


def test_resolve_run_name_leaves_dataset_out_for_fake_data(outcome):
    config = outcome("sft", {"data": {"type": "fake"}}).clean()
    assert re.fullmatch(r"qwen3-0\.6b--[0-9a-f]{8}", config.run.name)


def test_resolve_run_name_ignores_fields_that_do_not_change_training(outcome):
    base = outcome("sft", {}).clean().run.name
    same = outcome(
        "sft",
        {"max_steps": 7, "dist_timeout_seconds": 60, "env_vars": {"A": "b"}, "clean": True},
    ).clean()
    other = outcome("sft", {"optim": {"lr": 3e-5}}).clean()
    assert same.run.name == base
    assert other.run.name != base


def test_resolve_run_name_names_wandb_run(outcome):
    config = outcome("sft", {"monitors": {"wandb": {}}}).clean()
    assert config.monitors.wandb.name == config.run.name


@pytest.mark.parametrize(
    ("run", "wandb", "expected"),
    [
        ({"name": "mine"}, {}, ("mine", "mine", "mine")),
        ({"name": "mine", "dir": "elsewhere"}, {}, ("mine", "elsewhere", "mine")),
        ({"name": "mine"}, {"name": "w"}, ("mine", "mine", "w")),
    ],
    ids=["name", "name-and-dir", "wandb-name"],
)
def test_resolve_run_name_leaves_explicit_names_alone(run, wandb, expected, outcome):
    config = outcome("sft", {"run": run, "monitors": {"wandb": wandb}}).clean()
    assert (config.run.name, config.run.dir, config.monitors.wandb.name) == expected


def test_resolve_run_name_keeps_explicit_dir(outcome):
    config = outcome("sft", {"run": {"dir": "my-dir"}}).clean()
    assert config.run.dir == "my-dir"
    assert re.fullmatch(r"reverse-text-sft--qwen3-0\.6b--[0-9a-f]{8}", config.run.name)


def test_resolve_run_name_drops_the_builtin_prefix(outcome):
    doc = {"model": {"name": "builtin:tiny-qwen3"}, "data": {"name": "builtin:reverse-text"}}
    config = outcome("sft", doc).clean()
    assert re.fullmatch(r"reverse-text--tiny-qwen3--[0-9a-f]{8}", config.run.name)


def test_resolve_run_name_ignores_a_new_setting_with_a_default(outcome):
    """A release that adds a setting (with its default) must not rename every unnamed run."""
    from typing import Annotated

    from pydantic import Field, create_model

    from trainspec.validators.pipeline import run_rules

    doc = {"optim": {"lr": 3e-4}, "data": {"batch_size": 8, "micro_batch_size": 4}}
    today = outcome("sft", doc).clean()
    later = create_model(
        "LaterSFTConfig", __base__=type(today), new_knob=(Annotated[int, Field(ge=0)], 7)
    )

    def name_later(document):
        config = later.model_validate(document)
        assert not run_rules(config, "sft").errors
        return config.run.name

    assert name_later(doc) == today.run.name
    assert name_later({**doc, "new_knob": 8}) != today.run.name  # set: another run


def test_resolve_run_name_same_name_for_a_default_written_out(outcome):
    implicit = outcome("sft", {}).clean()
    defaults = {"optim": {"type": "adamw", "lr": implicit.optim.lr}}
    defaults["model"] = {"seq_len": implicit.model.seq_len}
    assert outcome("sft", defaults).clean().run.name == implicit.run.name
    defaults["model"]["seq_len"] += 1
    assert outcome("sft", defaults).clean().run.name != implicit.run.name
