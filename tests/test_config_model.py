"""Lazily loaded tables (x-trainspec-lazy: sft's [eval] and [inference]): a config that does not
set them loads none of their classes; one that does gets them validated strictly, with their
errors at their full path, dumped and read back unchanged, and cached like a kind's validator."""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

import pytest
from helpers.support import ROOT, python_json
from pydantic import ValidationError

from trainspec import generated
from trainspec.config import dump_json, load
from trainspec.config.kinds import config_class
from trainspec.config_model import LAZY, ConfigModel, lazy_targets, table_class

HEAVY = ("sft_eval", "inference", "orchestrator", "environment", "client")
PROBE = """
import json, sys
from trainspec.config import load
loaded = {}
for path in sys.argv[1:]:
    config = load("sft", [path]).config
    loaded[path] = sorted(
        name.rsplit(".", 1)[1] for name in sys.modules if name.startswith("trainspec.generated.")
    )
print(json.dumps(loaded))
"""


def probe(*paths: str, cache: Path) -> dict[str, list[str]]:
    return python_json(PROBE, *paths, cache=cache)


def test_the_sft_class_names_its_lazy_tables():
    assert lazy_targets(config_class("sft")) == {
        "eval": "sft_eval:EvalsEvalConfig",
        "inference": "inference:InferenceConfig",
    }


@pytest.mark.parametrize("cached", [False, True], ids=["building", "from the cache"])
def test_a_config_without_evals_loads_none_of_their_classes(tmp_path, cached):
    if cached:
        probe("configs/sft/evals.toml", cache=tmp_path)  # stores every validator it built
    loaded = probe("configs/sft/tiny.toml", "configs/sft/evals.toml", cache=tmp_path)
    without, with_evals = loaded["configs/sft/tiny.toml"], loaded["configs/sft/evals.toml"]
    assert not set(HEAVY) & set(without), without
    assert {"sft_eval", "orchestrator"} <= set(with_evals)
    if cached:
        assert sorted(p.name.split("-")[1] for p in tmp_path.glob("validator-*.pickle")) == [
            "sft",
            "sft_eval.EvalsEvalConfig",
        ]


def test_a_set_table_is_its_class():
    config = load("sft", [ROOT / "configs/sft/evals.toml"]).config
    assert type(config.eval) is table_class("sft_eval:EvalsEvalConfig")
    assert [source.name for source in config.eval.source] == ["reverse-text"]
    assert config.inference is None


def test_errors_inside_a_lazy_table_keep_their_path():
    cls = config_class("sft")
    with pytest.raises(ValidationError) as raised:
        cls.model_validate(
            {"eval": {"env_server_base_port": "5000", "bogus": 1, "concurrency": {"x": 2}}}
        )
    locations = {error["loc"] for error in raised.value.errors()}
    assert ("eval", "env_server_base_port") in locations
    assert ("eval", "bogus") in locations
    assert ("eval", "concurrency", "x") in locations
    assert ("eval", "source") in locations  # required, and missing
    with pytest.raises(ValidationError) as raised:
        cls.model_validate({"inference": {"server": {"port": "8000"}}})
    assert {error["loc"][:3] for error in raised.value.errors()} == {
        ("inference", "server", "port")
    }


def test_the_none_spelling_turns_a_lazy_table_off():
    assert config_class("sft").model_validate({"eval": "None", "inference": "None"}).eval is None


def test_a_lazy_table_dumps_and_reads_back():
    resolved = load("sft", [ROOT / "configs/sft/evals.toml"])
    dumped = json.loads(dump_json(resolved.config))
    assert dumped["eval"]["source"] and dumped["eval"]["env_server_base_port"] == 5000
    again = config_class("sft").model_validate(dumped)
    assert again == resolved.config
    written = resolved.config.model_dump(exclude_unset=True)["eval"]  # reaches into the table
    assert written == resolved.config.eval.model_dump(exclude_unset=True) != dumped["eval"]


def test_the_class_schema_describes_the_table():
    """What editors never see (they read schema/), but the parity proof compares."""
    prop = config_class("sft").model_json_schema()["properties"]["eval"]
    (table,) = [member for member in prop["anyOf"] if member.get("type") != "null"]
    assert {"source", "client", "env_server_base_port", "concurrency"} <= set(table["properties"])
    assert prop[LAZY] == "sft_eval:EvalsEvalConfig"


def test_every_lazy_table_names_a_generated_class():
    """The tag make gen writes (the schema file's title) is the class the generator wrote."""
    modules = [
        importlib.import_module(f"trainspec.generated.{info.name}")
        for info in pkgutil.iter_modules(generated.__path__)
    ]
    classes = [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, ConfigModel)
    ]
    targets = {target for cls in classes for target in lazy_targets(cls).values()}
    assert targets == {"sft_eval:EvalsEvalConfig", "inference:InferenceConfig"}
    for target in targets:
        assert issubclass(table_class(target), ConfigModel)
