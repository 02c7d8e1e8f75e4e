"""A source's `env` and `serve` tables are verifiers 0.4's own config classes, described in
schema/environment.json: this walks verifiers' classes from the single-agent env's config and
ServeConfig, table by table, beside the classes `make gen` writes from the schema, and fails
when the schema misses a field or has one verifiers lacks, or when a field differs in type,
bounds, default or requiredness, or a table in taking extra keys. As the renderers test does for
[renderer] (test_renderer_variants.py).

Where verifiers narrows a table to a plugin's own class (the env class the ids select, a
taskset's, its task's, a judge's, a harness's), the schema's table is open (OPEN): those keys
are checked by the plugin's class when the environment loads. A tag (`type`) is required in the
schema's variants but the default one, as the generated classes fill in the default variant of a
union table written without its tag."""

from __future__ import annotations

import json
import types
import typing
from pathlib import PurePath
from typing import Annotated, Any, Literal

import pytest
import verifiers.v1 as vf
from helpers.env_tables import (
    ENV_TABLES,
    OWN_DEFAULTS,
    RENDERER,
    SERVE_TABLES,
    handed_to_verifiers,
    schema_leaves,
    set_leaves,
)
from helpers.support import ROOT
from pydantic import BaseModel, Field, create_model
from typing_extensions import TypeAliasType

from trainspec.config import dump_json, load, validate
from trainspec.config_model import ConfigModel, written
from trainspec.generated import environment as ours
from trainspec.trainers.orchestrator.environments.env_servers import serve_config
from trainspec.trainers.orchestrator.environments.verifiers_config import env_config

# The schema's open tables: verifiers' base class there is narrowed to a plugin's own subclass.
OPEN = {
    "EnvConfig": "the env class the ids select: its roles (`player`, `solver`) and settings",
    "EnvTasksetConfig": "the taskset's own config class (`split`, `turns`, ...)",
    "EnvTaskConfig": "the taskset's task config class (`power_per_turn`, ...)",
    "EnvJudgeConfig": "the judge plugin's config class",
    "HarnessConfig": "the harness plugin's config class (rlm's `summarize_at_tokens`)",
}
ROOTS = [(ours.EnvConfig, vf.SingleAgentEnvConfig), (ours.ServeConfig, vf.ServeConfig)]
# Values for the required settings, so each side builds a table with its own defaults.
REQUIRED = {
    "max_retries": 0,
    "servers": [{"type": "server"}],
    "url": "http://tunnel",
    "port": 9000,
    "runtime": "/skills",
}
BOUNDS = ("ge", "gt", "le", "lt", "min_length", "max_length")


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """An annotation without its aliases and Annotated layers, and the metadata they held."""
    meta: list[Any] = []
    while True:
        if isinstance(annotation, TypeAliasType):
            annotation = annotation.__value__
        elif typing.get_origin(annotation) is Annotated:
            annotation, *more = typing.get_args(annotation)
            meta += more
        else:
            return annotation, meta


def _bounds(meta: list[Any]) -> set[tuple[str, Any]]:
    found = set()
    for item in meta:
        for name in BOUNDS:
            value = getattr(item, name, None)
            if value is not None and not isinstance(item, type):
                found.add((name, value))
        found |= _bounds(list(getattr(item, "metadata", None) or []))
    return found


def _tag(model: type[BaseModel]) -> Any:
    field = model.model_fields.get("type")
    args = typing.get_args(_unwrap(field.annotation)[0]) if field else ()
    return args[0] if len(args) == 1 else None


def _is_table(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _renderer(model: type[BaseModel]) -> bool:
    """The renderers package's config (and the schema's renderer.json): its own test's."""
    return model.__module__.startswith(("renderers", "trainspec.generated.renderer"))


def shape(annotation: Any, bounds: set | None = None) -> Any:
    """What a field takes, the same for verifiers' annotation and the generated one: Path is a
    string, a table is ("table", its tag), a union a set of members; bounds are collected."""
    annotation, meta = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    record = origin is dict and typing.get_origin(typing.get_args(annotation)[0]) is Literal
    if bounds is not None and not record:  # a record's length is its required keys
        bounds |= _bounds(meta)
    if origin in (typing.Union, types.UnionType):
        members = [shape(arg, bounds) for arg in typing.get_args(annotation)]
        flat = [m for member in members for m in (member if isinstance(member, frozenset)
                                                  else [member])]  # fmt: skip
        return frozenset(flat)
    if origin is Literal:
        return ("literal", frozenset(typing.get_args(annotation)))
    if origin is list:
        return ("list", shape(typing.get_args(annotation)[0], bounds))
    if origin is dict:
        key, value = typing.get_args(annotation)
        key_shape = shape(key, bounds)
        if isinstance(key_shape, tuple) and key_shape[0] == "literal":  # {runtime: str}
            return ("record", key_shape[1], shape(value, bounds))
        return ("dict", key_shape, shape(value, bounds))
    if _is_table(annotation):
        if _renderer(annotation):
            return ("renderer",)
        fields = annotation.model_fields
        if (
            fields
            and _tag(annotation) is None
            and annotation.model_config.get("extra") == "forbid"
            and all(f.is_required() for f in fields.values())
        ):  # a table of required keys, one type: the schema's spelling of a record
            values = {shape(f.annotation) for f in fields.values()}
            if len(values) == 1:
                return ("record", frozenset(fields), values.pop())
        return ("table", _tag(annotation))
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "str"
    return {bool: "bool", int: "int", float: "float", str: "str"}.get(annotation, annotation)


def tables(annotation: Any) -> dict[Any, type[BaseModel]]:
    """The tables a field holds, by tag (None for an untagged one), renderers left out."""
    annotation, _ = _unwrap(annotation)
    if _is_table(annotation):
        return {} if _renderer(annotation) else {_tag(annotation): annotation}
    found: dict[Any, type[BaseModel]] = {}
    for arg in typing.get_args(annotation):
        found.update(tables(arg))
    return found


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _built(model: type[BaseModel]) -> BaseModel:
    """The table with its defaults (and the REQUIRED values), built by its own class."""
    needed = {name: REQUIRED.get(name) for name, f in model.model_fields.items() if f.is_required()}
    if _tag(model) is not None:
        needed["type"] = _tag(model)
    return model.model_validate(needed)


def differences(mine: type[BaseModel], theirs: type[BaseModel], where: str, seen=None) -> list:
    """What differs between a generated class and verifiers' class, and the tables below."""
    seen = set() if seen is None else seen
    seen.add(mine)
    found = []
    if set(mine.model_fields) != set(theirs.model_fields):
        missing = sorted(set(theirs.model_fields) - set(mine.model_fields))
        extra = sorted(set(mine.model_fields) - set(theirs.model_fields))
        found.append(f"{where}: the schema lacks {missing}, verifiers lacks {extra}")
    extra_theirs = theirs.model_config.get("extra") or "ignore"
    want = "allow" if extra_theirs == "allow" or mine.__name__ in OPEN else "forbid"
    if mine.model_config.get("extra") != want:
        found.append(f"{where}: takes extra keys {mine.model_config.get('extra')}, not {want}")
    built_mine, built_theirs = _built(mine), _built(theirs)
    for name in sorted(mine.model_fields.keys() & theirs.model_fields.keys()):
        a, b = mine.model_fields[name], theirs.model_fields[name]
        here = f"{where}.{name}"
        bounds_a, bounds_b = _bounds(list(a.metadata)), _bounds(list(b.metadata))
        if shape(a.annotation, bounds_a) != shape(b.annotation, bounds_b):
            found.append(f"{here}: type {a.annotation} is not verifiers' {b.annotation}")
        if bounds_a != bounds_b:
            found.append(f"{here}: bounds {sorted(bounds_a)} are not verifiers' {sorted(bounds_b)}")
        if name == "type" and _tag(mine) is not None:
            continue  # a variant's tag: compared as its literal above
        if a.is_required() != b.is_required():
            found.append(f"{here}: required {a.is_required()}, in verifiers {b.is_required()}")
        elif not b.is_required():
            got, want_default = (
                _plain(getattr(built_mine, name)),
                _plain(getattr(built_theirs, name)),
            )
            expected = _with_own_defaults(want_default, here)
            if got != expected:
                whose = "verifiers'" if expected == want_default else "trainspec's own"
                found.append(f"{here}: default {got!r} is not {whose} {expected!r}")
        inner_mine, inner_theirs = tables(a.annotation), tables(b.annotation)
        for tag in inner_mine.keys() & inner_theirs.keys():
            if inner_mine[tag] not in seen:
                found += differences(inner_mine[tag], inner_theirs[tag], f"{here}", seen)
    return found


def _with_own_defaults(value: Any, here: str) -> Any:
    """verifiers' default at `here` with trainspec's own defaults (OWN_DEFAULTS) in place."""
    if isinstance(value, dict):
        return {key: _with_own_defaults(inner, f"{here}.{key}") for key, inner in value.items()}
    return OWN_DEFAULTS.get(here, value)


def walked() -> tuple[list[str], set[type[BaseModel]]]:
    seen: set[type[BaseModel]] = set()
    found = []
    for mine, theirs in ROOTS:
        found += differences(mine, theirs, mine.__name__, seen)
    return found, seen


def test_the_schema_is_verifiers_env_and_serve_config():
    found, _ = walked()
    assert not found, "\n".join(found)


def test_the_walk_reaches_every_table_of_the_schema():
    _, seen = walked()
    generated = {
        cls
        for cls in vars(ours).values()
        if isinstance(cls, type) and issubclass(cls, ConfigModel) and cls is not ConfigModel
    }
    records = {ours.SkillRootConfig}  # compared as verifiers' {runtime: str}
    assert generated - records == seen
    assert len(seen) == 31


def test_the_walk_sees_a_missing_field_a_changed_default_and_an_open_table():
    """The comparison fails on a drift planted in a copy of a generated class (at the walk's
    path of the env's timeout table, where trainspec's own episode default is allowed)."""
    fields = {name: (f.annotation, f) for name, f in ours.EnvTimeoutConfig.model_fields.items()}
    dropped = create_model("EnvTimeoutConfig", __base__=ConfigModel, episode=fields["episode"])
    found = differences(dropped, vf.configs.env.TimeoutConfig, "EnvConfig.timeout")
    assert found == ["EnvConfig.timeout: the schema lacks ['finalize'], verifiers lacks []"]
    changed = create_model(
        "EnvTimeoutConfig",
        __base__=ConfigModel,
        episode=(float | None, Field(None)),
        finalize=(float | None, Field(30.0)),
    )
    found = differences(changed, vf.configs.env.TimeoutConfig, "EnvConfig.timeout")
    assert found == [
        "EnvConfig.timeout.episode: default None is not trainspec's own 3600.0",
        "EnvConfig.timeout.finalize: default 30.0 is not verifiers' None",
    ]
    opened = create_model("EnvTimeoutConfig", __base__=ConfigModel, __config__=None, **fields)
    opened.model_config["extra"] = "allow"
    found = differences(opened, vf.configs.env.TimeoutConfig, "EnvConfig.timeout")
    assert found == ["EnvConfig.timeout: takes extra keys allow, not forbid"]


def test_a_bound_and_a_type_that_differ_are_seen():
    bounded = create_model(
        "StaticPoolConfig",
        __base__=ConfigModel,
        type=(Literal["static"], ...),
        num_workers=(int, Field(4, ge=2)),
    )
    found = differences(bounded, vf.StaticPoolConfig, "serve.pool")
    assert found == ["serve.pool.num_workers: bounds [('ge', 2)] are not verifiers' [('ge', 1)]"]
    typed = create_model(
        "StaticPoolConfig",
        __base__=ConfigModel,
        type=(Literal["static"], ...),
        num_workers=(float, Field(4, ge=1)),
    )
    (found,) = differences(typed, vf.StaticPoolConfig, "serve.pool")
    assert found.startswith("serve.pool.num_workers: type <class 'float'> is not verifiers'")


@pytest.mark.parametrize("table", ENV_TABLES, ids=lambda t: t["agent"]["runtime"]["type"]
                         if "agent" in t else "")  # fmt: skip
def test_an_env_table_reaches_verifiers_as_written(table):
    """What a source hands verifiers (verifiers_config.env_config of the generated table)
    builds verifiers' config with every value written, a taskset's own keys included."""
    config = env_config(ours.EnvConfig.model_validate(table), "eval.source[0].env")
    assert _subset(table, config.model_dump(mode="json"))
    assert config.taskset.turns == table["taskset"].get("turns", 1)  # the taskset's own class


@pytest.mark.parametrize("table", SERVE_TABLES)
def test_a_serve_table_reaches_verifiers_as_written(table):
    config = serve_config(written(ours.ServeConfig.model_validate(table)), "eval.source[0].serve")
    assert _subset(table, config.model_dump(mode="json"))


def test_the_tables_set_every_leaf_of_the_schema():
    """So the field-coverage tests may count each env and serve leaf as handed to verifiers:
    a new field needs a value in ENV_TABLES or SERVE_TABLES, and then reaches verifiers."""
    written = set().union(*(set_leaves(t, "env") for t in ENV_TABLES))
    written |= set().union(*(set_leaves(t, "serve") for t in SERVE_TABLES))
    leaves = schema_leaves()
    assert len(leaves) > 90 and "env.agent.runtime.vm" in leaves
    assert leaves - written == {leaf for leaf in leaves if leaf.startswith(RENDERER)} - written
    assert {f"{RENDERER}name", f"{RENDERER}thinking_retention"} <= written
    assert set(handed_to_verifiers("eval.source[]")) == {f"eval.source[].{x}" for x in leaves}


def test_a_resolved_dump_keeps_the_tables_as_written():
    """`rl` hands the orchestrator its resolved config as a file: read back, each source's env
    and serve tables hand verifiers the same settings (not every default of the base classes,
    which a plugin's own class may change)."""
    resolved = load("rl_run", [ROOT / "configs" / "rl" / "env" / "reverse-text.toml"]).config
    dumped = json.loads(dump_json(resolved.orchestrator))
    source = dumped["eval"]["source"][0]
    assert source["env"] == {
        "taskset": {"id": "trainspec-reverse-text", "split": "test"},
        "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}},
    }
    assert source["serve"] is None
    again = validate("orchestrator", dumped).config
    for before, after in zip(resolved.orchestrator.eval.source, again.eval.source, strict=True):
        assert written(after.env) == written(before.env) == source["env"]
    train = written(again.train.source[0].env)
    assert train["taskset"] == {"id": "trainspec-reverse-text", "split": "train", "turns": 2}


def _subset(written: Any, got: Any) -> bool:
    """Whether every value of `written` is in `got` at the same place."""
    if isinstance(written, dict):
        return isinstance(got, dict) and all(
            key in got and _subset(value, got[key]) for key, value in written.items()
        )
    if isinstance(written, list):
        return len(written) == len(got) and all(map(_subset, written, got))
    return written == got
