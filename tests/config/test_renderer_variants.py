"""`[renderer]` is the reference's union on `name`: each variant takes its own settings, with the
`renderers` package's types and defaults; `default` and `custom` take extra keys too, the others
reject an unknown key naming the variants that have it."""

from __future__ import annotations

import io
import typing

import pytest
from helpers.support import schema_accepts
from pydantic import BaseModel
from renderers import RendererConfig as PackageRendererConfig
from renderers.configs import INKLING_EFFORT_MAP

from trainspec.cli.validate_config import run
from trainspec.config import ConfigError, validate
from trainspec.config_model import union_members
from trainspec.generated.renderer import (
    AutoRendererConfig,
    CustomRendererConfig,
    DefaultRendererConfig,
    Qwen3RendererConfig,
    RendererConfig,
)


def _variants(union) -> dict[str, type[BaseModel]]:
    members = [m for m in union_members(union) if isinstance(m, type)]
    return {_tag(m): m for m in members}


def _tag(model: type[BaseModel]) -> str:
    (tag,) = typing.get_args(model.model_fields["name"].annotation)
    return tag


def _literals(annotation) -> set:
    """The constants a field's annotation allows (Literal members of a union), else empty."""
    if typing.get_origin(annotation) is typing.Literal:
        return set(typing.get_args(annotation))
    return {value for arg in typing.get_args(annotation) for value in _literals(arg)}


OURS = _variants(RendererConfig)
THEIRS = _variants(PackageRendererConfig)


def test_every_variant_of_the_renderers_package_is_in_the_schema():
    assert list(OURS) == list(THEIRS) and len(OURS) == 31


@pytest.mark.parametrize("name", list(THEIRS))
def test_a_variant_has_the_packages_fields_and_defaults(name):
    ours, theirs = OURS[name].model_fields, THEIRS[name].model_fields
    assert list(ours) == list(theirs)  # `name` and thinking_retention included
    for field, info in theirs.items():
        if field == "name":
            continue
        mine = ours[field]
        assert mine.is_required() == info.is_required(), field
        if not info.is_required():
            assert mine.default == info.default, field
        if _literals(info.annotation):  # the choices the package's type spells out
            assert _literals(mine.annotation) == _literals(info.annotation), field
    extra = THEIRS[name].model_config.get("extra")
    assert OURS[name].model_config.get("extra") == ("allow" if extra == "allow" else "forbid")


def test_inklings_effort_labels_are_the_packages():
    # the package types it str | float and checks the label in a validator; the schema lists them
    labels = _literals(OURS["inkling"].model_fields["reasoning_effort"].annotation)
    assert labels == set(INKLING_EFFORT_MAP)


def resolved(document: dict):
    assert schema_accepts("sft", document)
    return validate("sft", document).config.renderer


def test_no_table_and_a_table_without_name_are_auto():
    assert isinstance(resolved({}), AutoRendererConfig)
    table = resolved({"renderer": {"thinking_retention": "all"}})
    assert isinstance(table, AutoRendererConfig) and table.thinking_retention == "all"


def test_a_variant_takes_its_own_settings():
    renderer = resolved({"renderer": {"name": "qwen3", "enable_thinking": False}})
    assert isinstance(renderer, Qwen3RendererConfig) and renderer.enable_thinking is False
    assert renderer.model_fields_set == {"name", "enable_thinking"}
    effort = resolved({"renderer": {"name": "inkling", "reasoning_effort": "max"}})
    assert effort.reasoning_effort == "max"
    assert resolved({"renderer": {"name": "qwen3.5"}}).enable_thinking is None


def test_default_and_custom_take_extra_keys():
    default = resolved({"renderer": {"name": "default", "enable_thinking": False}})
    assert isinstance(default, DefaultRendererConfig)
    assert default.model_extra == {"enable_thinking": False}
    custom = {"name": "custom", "import_path": "mine.Renderer", "clear_thinking": True}
    assert isinstance(resolved({"renderer": custom}), CustomRendererConfig)


def rejected(document: dict):
    assert not schema_accepts("sft", document)
    with pytest.raises(ConfigError) as raised:
        validate("sft", document)
    (error,) = raised.value.errors
    return error


def test_an_unknown_key_names_the_variants_that_have_it():
    error = rejected({"renderer": {"name": "qwen3", "bogus": 1}})
    assert (error.path, error.message) == ("renderer.bogus", "is not a known key of [renderer]")
    assert error.fix == "remove bogus; [renderer] takes: thinking_retention, name, enable_thinking"
    error = rejected({"renderer": {"name": "qwen3", "add_vision_id": True}})
    assert error.path == "renderer.add_vision_id"
    assert error.fix.startswith('add_vision_id is a setting of renderer.name "qwen3.5" or')
    assert error.fix.endswith('not "qwen3"')
    assert rejected({"renderer": {"enable_thinking": False}}).fix.endswith('not "auto"')


def test_a_wrong_value_or_name_is_reported_where_it_is():
    error = rejected({"renderer": {"name": "qwen3.8", "reasoning_effort": "loud"}})
    assert error.path == "renderer.reasoning_effort"
    error = rejected({"renderer": {"name": "inkling", "reasoning_effort": 1.5}})
    assert error.path == "renderer.reasoning_effort"
    error = rejected({"renderer": {"name": "qwen35"}})
    assert (error.path, error.fix) == ("renderer.name", 'did you mean "qwen3.5"?')
    error = rejected({"renderer": {"name": "custom"}})
    assert (error.path, error.message) == ("renderer.import_path", "is required")


def check_file(tmp_path, text: str) -> tuple[int, str]:
    path = tmp_path / "renderer.toml"
    path.write_text(text)
    out = io.StringIO()
    return run(["--kind", "sft", str(path)], out, io.StringIO()), out.getvalue()


def test_validate_config_points_at_the_line(tmp_path):
    code, _ = check_file(tmp_path, '[renderer]\nname = "qwen3"\nenable_thinking = false\n')
    assert code == 0
    code, report = check_file(tmp_path, '[renderer]\nname = "qwen3"\nbogus = 1\n')
    assert code == 1
    assert f"{tmp_path / 'renderer.toml'}:3:1: error: renderer.bogus is not a known key" in report
