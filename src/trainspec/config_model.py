"""Base class of every generated config class: the TOML conventions of trainspec.

`make gen` points datamodel-code-generator at this class (`base-class` in pyproject.toml), so
each generated model inherits three input conventions, the same ones the JSON Schema states:

* The string ``"None"`` is null. TOML has no null, so a nullable setting is turned off by
  writing ``"None"`` (every nullable property of the schema lists it as a documented value).
* A table without ``type`` selects the union's default variant: the one variant whose ``type``
  is optional in the schema (``[optim]`` alone configures AdamW).
* A sub-config that also accepts a boolean (``model.full_offload``) reads ``true`` as "on with
  defaults" and ``false`` as off.

Validation is strict (no string-to-number or number-to-bool coercion), so a generated class
accepts exactly what its schema accepts.
"""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler
from pydantic_core import core_schema
from typing_extensions import TypeAliasType

NONE_STRING = "None"


@dataclass(frozen=True, slots=True)
class _FieldConventions:
    nullable: bool
    default_tag: str | None  # tag filled in when a table of a union field has no `type`
    bool_switch: bool  # a sub-config that also takes true/false


def union_members(annotation: Any) -> list[Any]:
    """Flatten an annotation into its union members, unwrapping aliases and Annotated."""
    if isinstance(annotation, TypeAliasType):
        return union_members(annotation.__value__)
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return union_members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in union_members(arg)]
    return [annotation]


def _default_tag(members: list[Any]) -> str | None:
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            tag = member.model_fields.get("type")
            if tag is not None and not tag.is_required():
                return tag.default
    return None


def _conventions(cls: type[ConfigModel]) -> dict[str, _FieldConventions]:
    found: dict[str, _FieldConventions] = {}
    for name, field in cls.model_fields.items():
        members = union_members(field.annotation)
        models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
        tagged = [m for m in models if "type" in m.model_fields]
        conventions = _FieldConventions(
            nullable=type(None) in members,
            default_tag=_default_tag(tagged) if len(tagged) > 1 else None,
            bool_switch=bool(models) and bool in members,
        )
        if conventions.nullable or conventions.default_tag or conventions.bool_switch:
            found[name] = conventions
    return found


def _convert(rule: _FieldConventions, value: Any) -> Any:
    """One value written with a TOML convention, as the generated field expects it."""
    if value == NONE_STRING and rule.nullable:
        return None
    if isinstance(value, bool) and rule.bool_switch:
        return {} if value else None
    if isinstance(value, dict) and rule.default_tag and "type" not in value:
        return {**value, "type": rule.default_tag}
    return value


class ConfigModel(BaseModel):
    """A config table: unknown keys are rejected, values are checked strictly, and non-finite
    numbers (TOML's nan and inf) are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        # Each field that uses a convention gets a plain function in front of its own
        # validator, so the conversion runs only where such a field is written (or validated
        # as a default). It goes inside the model schema, as pydantic's own validators do, so
        # every place the model is used (pydantic reuses one definition) gets it.
        schema = handler(source)
        conventions = _conventions(cls)
        if conventions:
            if schema.get("type") != "model" or schema["schema"].get("type") != "model-fields":
                raise TypeError(f"{cls.__name__}: unexpected core schema layout for conventions")
            fields = schema["schema"]["fields"]
            for name, rule in conventions.items():
                holder = fields[name]  # the field, or the default around its value schema
                if holder["schema"].get("type") == "default":
                    holder = holder["schema"]
                holder["schema"] = core_schema.no_info_before_validator_function(
                    functools.partial(_convert, rule), holder["schema"]
                )
        return schema
