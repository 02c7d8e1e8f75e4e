"""The generated class hierarchy and the schema's shape are what the design says."""

from __future__ import annotations

import json

import pytest
from helpers.support import SCHEMA_DIR

from trainspec.config import config_class
from trainspec.generated.base_trainer import BaseTrainerConfig
from trainspec.generated.rl_trainer import RLTrainerConfig
from trainspec.generated.sft_trainer import SFTTrainerConfig

SHARED = [
    "model",
    "tokenizer",
    "optim",
    "scheduler",
    "ckpt",
    "log",
    "matmul_precision",
    "max_steps",
    "memory_profiler_path",
    "gc",
    "trace_path",
    "dist_timeout_seconds",
    "heartbeat",
    "control",
    "env_vars",
]


def test_trainer_classes_extend_the_base():
    assert issubclass(RLTrainerConfig, BaseTrainerConfig)
    assert issubclass(SFTTrainerConfig, BaseTrainerConfig)
    assert config_class("rl") is RLTrainerConfig
    assert config_class("sft") is SFTTrainerConfig


def test_base_has_exactly_the_shared_fields_in_order():
    assert list(BaseTrainerConfig.model_fields) == SHARED


@pytest.mark.parametrize("cls", [RLTrainerConfig, SFTTrainerConfig])
def test_shared_fields_come_first_and_are_the_base_fields(cls):
    names = list(cls.model_fields)
    assert names[: len(SHARED)] == SHARED
    for name in SHARED:
        assert cls.model_fields[name] is BaseTrainerConfig.model_fields[name] or (
            cls.model_fields[name].annotation == BaseTrainerConfig.model_fields[name].annotation
            and cls.model_fields[name].default == BaseTrainerConfig.model_fields[name].default
        )
    assert not set(names[len(SHARED) :]) & set(SHARED)


def test_schema_base_lists_the_shared_fields_and_trainers_extend_it():
    base = json.loads((SCHEMA_DIR / "base_trainer.json").read_text())
    assert list(base["properties"]) == SHARED
    for name in ("rl_trainer", "sft_trainer"):
        schema = json.loads((SCHEMA_DIR / f"{name}.json").read_text())
        assert schema["allOf"][0] == {"$ref": "base_trainer.json"}
        assert schema["unevaluatedProperties"] is False
        assert not set(schema["allOf"][1]["properties"]) & set(SHARED)


def test_dist_timeout_default_is_900():
    assert BaseTrainerConfig.model_fields["dist_timeout_seconds"].default == 900


def _properties(node, where):
    """Yield (location, name, property schema, required names) for every object schema."""
    if isinstance(node, dict):
        if isinstance(node.get("properties"), dict):
            required = set(node.get("required", []))
            for name, prop in node["properties"].items():
                yield f"{where}/properties/{name}", name, prop, required
        for key, value in node.items():
            yield from _properties(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _properties(value, f"{where}/{index}")


ALL_PROPERTIES = [
    item
    for path in sorted(SCHEMA_DIR.glob("*.json"))
    for item in _properties(json.loads(path.read_text()), path.name)
]


def test_schema_files_are_draft_2020_12():
    for path in SCHEMA_DIR.glob("*.json"):
        schema = json.loads(path.read_text())
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", path.name


@pytest.mark.parametrize("where, name, prop, required", ALL_PROPERTIES, ids=lambda v: str(v))
def test_every_property_has_a_sentence_and_a_default(where, name, prop, required):
    description = prop.get("description", "")
    assert description and description.endswith((".", ")")), f"{where}: needs a description"
    assert "default" in prop or name in required, f"{where}: needs a default or to be required"


def test_the_schema_walk_found_the_whole_tree():
    assert len(ALL_PROPERTIES) > 150


def _takes_free_text(prop: dict) -> bool:
    branches = [prop, *prop.get("anyOf", [])]
    return any(b.get("type") in ("string", ["string", "null"]) for b in branches) and not any(
        "oneOf" in b or "enum" in b for b in branches
    )


@pytest.mark.parametrize(
    "where, name, prop, required",
    [item for item in ALL_PROPERTIES if _takes_free_text(item[2])],
    ids=lambda v: str(v),
)
def test_free_text_settings_show_examples(where, name, prop, required):
    assert prop.get("examples"), f"{where}: a free-form string needs examples for editors"


@pytest.mark.parametrize("where, name, prop, required", ALL_PROPERTIES, ids=lambda v: str(v))
def test_every_enum_value_is_documented(where, name, prop, required):
    def consts(node):
        if isinstance(node, dict):
            assert "enum" not in node or name == "env_vars", f"{where}: use oneOf of const"
            if "const" in node and name != "type":
                yield node
            for value in node.values():
                yield from consts(value)
        elif isinstance(node, list):
            for value in node:
                yield from consts(value)

    for node in consts(prop):
        assert node.get("description"), f"{where}: value {node['const']!r} has no description"
