"""Every example TOML names its schema, validates under its kind, and round-trips through JSON."""

from __future__ import annotations

import json
import tomllib

import pytest
from helpers.support import ROOT, SCHEMA_NAMES, schema_accepts

from trainspec.config import dump_json, load, validate

CONFIGS = sorted((ROOT / "configs").rglob("*.toml"))


def kind_of(path) -> str:
    """The kind whose schema line 1 names, relative to the file (configs/rl/algo/ is deeper)."""
    first = path.read_text().splitlines()[0]
    target = first.removeprefix("#:schema ").strip()
    if first.startswith("#:schema ") and not target.startswith("/"):
        for kind, name in SCHEMA_NAMES.items():
            if (path.parent / target).resolve() == ROOT / "generated" / "schemas" / f"{name}.json":
                return kind
    raise AssertionError(f"{path}: line 1 must be a #:schema directive, got {first!r}")


def test_there_are_realistic_and_tiny_configs_of_each_kind():
    names = {(kind_of(p), p.stem) for p in CONFIGS}
    for kind in ("rl", "sft"):
        assert (kind, "tiny") in names
        assert len([n for n in names if n[0] == kind]) >= 2


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_directive_points_at_an_existing_schema(path):
    target = path.read_text().splitlines()[0].removeprefix("#:schema ").strip()
    assert (path.parent / target).resolve().is_file()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_config_validates_under_its_kind(path):
    kind = kind_of(path)
    document = tomllib.loads(path.read_text())
    assert schema_accepts(kind, document)
    resolved = load(kind, [path])
    assert resolved.warnings == []
    other = "sft" if kind == "rl" else "rl"
    assert not schema_accepts(other, document)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_resolved_dump_reparses_to_an_equal_config(path):
    kind = kind_of(path)
    resolved = load(kind, [path])
    text = dump_json(resolved.config)
    again = validate(kind, json.loads(text))
    assert again.config == resolved.config
    assert again.warnings == []
    assert dump_json(again.config) == text
    # The dump is itself valid under the schema (explicit nulls included).
    assert schema_accepts(kind, json.loads(text))
