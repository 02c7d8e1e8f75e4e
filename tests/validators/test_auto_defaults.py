"""resolve_auto_defaults: settings whose default is "auto" resolve per mode, and the table of
them is read from the schema ("x-trainspec-auto"), not kept in the code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from trainspec.config import KINDS, config_class
from trainspec.config_model import LAZY, ConfigModel, LazyTable
from trainspec.generated.rl_trainer import RLTrainerConfig
from trainspec.validators.auto import AUTO_KEY, auto_table, resolve_auto_defaults
from trainspec.validators.context import RuleContext

SCHEMA = Path(__file__).resolve().parents[2] / "schema"

AUTO_TABLE = {
    "model.moe_router_dtype": {"rl": "float32", "sft": "bfloat16"},
    "model.freeze_moe_router": {"rl": True, "sft": False},
    "optim.weight_decay": {"rl": 0.0, "sft": 0.01},
}
OPTIMIZERS = ("adamw", "sgd", "muon", "sign_sgd")
# Explicit values per path: each mode's resolved value, plus others where the type allows.
EXPLICIT = {
    "model.moe_router_dtype": ["float32", "bfloat16"],
    "model.freeze_moe_router": [True, False],
    "optim.weight_decay": [0.0, 0.01, 0.1],
}

kinds = pytest.mark.parametrize("kind", KINDS)


def other(kind: str) -> str:
    return "sft" if kind == "rl" else "rl"


def get(config: Any, path: str) -> Any:
    for part in path.split("."):
        config = getattr(config, part)
    return config


def document(path: str, value: Any, optimizer: str | None = None) -> dict:
    table, leaf = path.split(".")
    doc: dict = {table: {leaf: value}}
    if optimizer is not None:
        doc.setdefault("optim", {})["type"] = optimizer
    return doc


def toml(value: Any) -> str:
    """A value as the schema descriptions write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- the table comes from the schema --------------------------------------------------------


@kinds
def test_auto_table_lists_the_three_auto_settings(kind):
    assert auto_table(config_class(kind)) == AUTO_TABLE


def test_schema_files_carry_the_auto_table():
    model = json.loads((SCHEMA / "model.json").read_text())
    optimizer = json.loads((SCHEMA / "optimizer.json").read_text())
    properties = {f"model.{name}": prop for name, prop in model["properties"].items()}
    properties.update(
        (f"optim.{name}", prop)
        for definition in optimizer["$defs"].values()
        for name, prop in definition.get("properties", {}).items()
    )
    in_schema = {path: prop[AUTO_KEY] for path, prop in properties.items() if AUTO_KEY in prop}
    assert in_schema == AUTO_TABLE
    assert in_schema == auto_table(RLTrainerConfig)
    for path, per_mode in in_schema.items():
        prop = properties[path]
        assert prop["default"] == "auto", path
        assert f"{toml(per_mode['rl'])} for RL" in prop["description"], path
        assert f"{toml(per_mode['sft'])} for SFT" in prop["description"], path


def test_weight_decay_auto_lives_in_the_shared_optimizer_base():
    optimizer = json.loads((SCHEMA / "optimizer.json").read_text())
    base = optimizer["$defs"]["base"]["properties"]["weight_decay"]
    assert base[AUTO_KEY] == AUTO_TABLE["optim.weight_decay"]
    for name in OPTIMIZERS:
        assert optimizer["$defs"][name]["allOf"] == [{"$ref": "#/$defs/base"}]


# --- resolution ----------------------------------------------------------------------------------


@kinds
@pytest.mark.parametrize("path", list(AUTO_TABLE))
@pytest.mark.parametrize("written", ["omitted", "auto"])
def test_resolve_auto_defaults_fills_auto_per_kind(kind, path, written, outcome):
    doc = {} if written == "omitted" else document(path, "auto")
    out = outcome(kind, doc)
    config = out.clean()
    value = get(config, path)
    assert value == AUTO_TABLE[path][kind]
    assert type(value) is type(AUTO_TABLE[path][kind])


@kinds
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("written", ["omitted", "auto"])
def test_resolve_auto_defaults_fills_weight_decay_for_every_optimizer(
    kind, optimizer, written, outcome
):
    optim = {"type": optimizer}
    if written == "auto":
        optim["weight_decay"] = "auto"
    config = outcome(kind, {"optim": optim}).clean()
    assert config.optim.type == optimizer
    assert config.optim.weight_decay == AUTO_TABLE["optim.weight_decay"][kind]
    assert isinstance(config.optim.weight_decay, float)


@kinds
@pytest.mark.parametrize(
    ("path", "value"),
    [(path, value) for path, values in EXPLICIT.items() for value in values],
)
def test_resolve_auto_defaults_leaves_explicit_values_alone(kind, path, value, outcome):
    config = outcome(kind, document(path, value)).clean()
    assert get(config, path) == value
    assert type(get(config, path)) is type(value)


@kinds
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("value", EXPLICIT["optim.weight_decay"])
def test_resolve_auto_defaults_leaves_explicit_weight_decay_alone_for_every_optimizer(
    kind, optimizer, value, outcome
):
    config = outcome(kind, document("optim.weight_decay", value, optimizer)).clean()
    assert config.optim.type == optimizer
    assert config.optim.weight_decay == value


@kinds
@pytest.mark.parametrize("path", list(AUTO_TABLE))
def test_resolve_auto_defaults_keeps_the_other_modes_value_when_explicit(kind, path, outcome):
    """An explicit value equal to what "auto" gives in the other mode is not re-resolved."""
    value = AUTO_TABLE[path][other(kind)]
    config = outcome(kind, document(path, value)).clean()
    assert get(config, path) == value
    assert get(config, path) != AUTO_TABLE[path][kind]


@kinds
def test_resolve_auto_defaults_reads_the_kind_from_the_context(kind):
    """The rule resolves for ctx.kind and reports nothing, even on the other kind's class."""
    config = config_class(other(kind)).model_validate({})
    ctx = RuleContext(kind, rule="resolve_auto_defaults")
    resolve_auto_defaults(config, ctx)
    assert ctx.errors == [] and ctx.warnings == []
    for path, per_mode in AUTO_TABLE.items():
        assert get(config, path) == per_mode[kind]


def test_resolve_auto_defaults_runs_before_the_run_identity_digest(outcome):
    """Shared rules run before mode rules: the SFT run name hashes the resolved values, so
    leaving weight_decay at "auto" names the run as writing the resolved value does."""
    implicit = outcome("sft", {}).clean().run.name
    explicit = outcome("sft", document("optim.weight_decay", 0.01)).clean().run.name
    assert implicit == explicit


class _Holder(ConfigModel):
    """A table holding [model] lazily, as sft holds [eval] (x-trainspec-lazy)."""

    model: Annotated[LazyTable | None, Field(json_schema_extra={LAZY: "model:ModelConfig"})] = None


@pytest.mark.parametrize("kind", KINDS)
def test_an_auto_setting_in_a_lazy_table_resolves_when_the_table_is_set(kind):
    assert auto_table(_Holder) == {}  # walking the class loads nothing
    holder = _Holder.model_validate({"model": {"name": "m"}})
    resolve_auto_defaults(holder, RuleContext(kind=kind))
    for path, per_mode in AUTO_TABLE.items():
        if path.startswith("model."):
            assert get(holder, path) == per_mode[kind], path
            assert path.split(".")[1] not in holder.model.model_fields_set
    resolve_auto_defaults(_Holder(), RuleContext(kind=kind))  # not set: nothing to resolve
