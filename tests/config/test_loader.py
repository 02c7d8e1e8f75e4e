"""Loading: file order, table merge, array replacement, overrides, unreadable input."""

from __future__ import annotations

import json

import pytest

from trainspec.config import ConfigError, ConfigFileError, dump_json, load, validate
from trainspec.config.merge import deep_merge, unflatten


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_files_merge_left_to_right_and_tables_deep_merge(tmp_path):
    a = write(tmp_path, "a.toml", "max_steps = 10\n[optim]\nlr = 1e-5\nbetas1 = 0.8\n")
    b = write(tmp_path, "b.toml", "max_steps = 20\n[optim]\nlr = 3e-5\n")
    config = load("rl", [a, b]).config
    assert config.max_steps == 20
    assert config.optim.lr == 3e-5
    assert config.optim.betas1 == 0.8
    assert load("rl", [b, a]).config.max_steps == 10


def test_arrays_replace_instead_of_appending(tmp_path):
    a = write(tmp_path, "a.toml", '[model.lora]\ntarget_modules = ["q_proj", "k_proj"]\n')
    b = write(tmp_path, "b.toml", '[model.lora]\ntarget_modules = ["o_proj"]\n')
    assert load("rl", [a, b]).config.model.lora.target_modules == ["o_proj"]


def test_overrides_apply_last_and_accept_dotted_paths(tmp_path):
    a = write(tmp_path, "a.toml", "[optim]\nlr = 1e-5\n")
    config = load("sft", [a], {"optim.lr": 2e-5, "model.seq_len": 512, "max_steps": 7}).config
    assert (config.optim.lr, config.model.seq_len, config.max_steps) == (2e-5, 512, 7)


def test_override_can_switch_a_union_variant_and_null_a_value(tmp_path):
    a = write(tmp_path, "a.toml", "[optim]\nlr = 1e-5\nbetas1 = 0.8\n")
    with pytest.raises(ConfigError):
        load("rl", [a], {"optim.type": "sgd"})  # betas1 is not an SGD key
    config = load("rl", [], {"optim.type": "sgd", "optim.max_norm": None}).config
    assert config.optim.type == "sgd" and config.optim.max_norm is None


def test_unflatten_and_merge():
    assert unflatten({"a.b": 1, "a.c": 2, "d": 3}) == {"a": {"b": 1, "c": 2}, "d": 3}
    assert deep_merge({"a": {"b": 1, "l": [1]}}, {"a": {"l": [2]}}) == {"a": {"b": 1, "l": [2]}}


def test_missing_file_and_bad_toml_raise_config_file_error(tmp_path):
    with pytest.raises(ConfigFileError) as err:
        load("rl", [tmp_path / "nope.toml"])
    assert "nope.toml" in str(err.value)
    bad = write(tmp_path, "bad.toml", "[model\nname = 1\n")
    with pytest.raises(ConfigFileError) as err:
        load("rl", [bad])
    assert "not valid TOML" in err.value.message
    assert (err.value.line, err.value.column) == (1, 7)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b'name = "\xff\xfe"\n')
    with pytest.raises(ConfigFileError):
        load("rl", [binary])


def test_unknown_kind_is_a_value_error():
    with pytest.raises(ValueError, match="choose one of rl, sft"):
        validate("ppo", {})  # type: ignore[arg-type]


def test_dump_keeps_explicit_nulls(kind):
    resolved = validate(kind, {"optim": {"max_norm": "None"}, "gc": "None"})
    dumped = json.loads(dump_json(resolved.config))
    assert dumped["optim"]["max_norm"] is None
    assert dumped["gc"] is None
    assert dumped["ckpt"] is None
    assert validate(kind, dumped).config == resolved.config


def test_type_errors_name_the_path_and_the_value(kind):
    with pytest.raises(ConfigError) as err:
        validate(kind, {"model": {"seq_len": "long"}, "optim": {"lr": -1}})
    issues = {e.path: e.message for e in err.value.errors}
    assert set(issues) == {"model.seq_len", "optim.lr"}
    assert issues["model.seq_len"] == 'should be an integer, got "long"'
    assert issues["optim.lr"] == "should be at least 0, got -1"


def test_missing_required_key_is_reported_at_its_path(kind):
    with pytest.raises(ConfigError) as err:
        validate(kind, {"heartbeat": {}})
    assert [(e.path, e.message) for e in err.value.errors] == [("heartbeat.url", "is required")]


def test_toml_conventions_apply_wherever_a_table_is_reused():
    # SFTDatasetConfig is both a variant of [data] and the type of [val.data]: pydantic builds
    # it once, so the conventions must live inside its schema (a regression the parity proof found).
    config = validate(
        "sft", {"data": {"subsets": "None"}, "val": {"data": {"subsets": "None", "seed": 1}}}
    ).config
    assert config.data.subsets is None
    assert config.val.data.subsets is None


def test_rule_errors_come_with_the_structural_ones():
    """One round of fixes: a wrong type elsewhere does not hide what the rules find."""
    from trainspec.config import ConfigError, validate

    document = {"model": {"seq_len": "long"}, "scheduler": {"type": "cosine"}}
    with pytest.raises(ConfigError) as err:
        validate("sft", document)
    assert [(e.path, e.rule) for e in err.value.errors] == [
        ("model.seq_len", None),
        ("max_steps", "validate_scheduler_steps"),
    ]


def test_rule_errors_about_a_rejected_value_are_left_out():
    """max_steps = "x" is wrong; the cosine rule would judge its default, so it stays quiet."""
    from trainspec.config import ConfigError, validate

    with pytest.raises(ConfigError) as err:
        validate("sft", {"max_steps": "x", "scheduler": {"type": "cosine"}})
    assert [e.path for e in err.value.errors] == ["max_steps"]
