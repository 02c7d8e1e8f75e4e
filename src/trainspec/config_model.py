"""Base class of every generated config class: the TOML conventions of trainspec.

`make gen` points datamodel-code-generator at this class (`base-class` in pyproject.toml). The
classes are generated from a view of the schema without the input conventions below
(tools/gen_view.py), so their fields read `int | None` and `FullOffloadConfig | None`; this class
turns what a user writes into those values before validation:

* The string ``"None"`` is null. TOML has no null, so a nullable setting is turned off by
  writing ``"None"`` (every nullable property of the schema lists it as a documented value).
* A table without its tag (``type``, or the union's own discriminator: ``name`` for
  ``[renderer]``) selects the union's default variant: the one variant whose tag is optional in
  the schema (``[optim]`` alone configures AdamW).
* A sub-config that is also a switch (``x-trainspec-switch``, e.g. ``model.full_offload``) reads
  ``true`` as "on with defaults" and ``false`` as off.

A class whose fields use a convention gets a plain function in front of its fields' validator,
through pydantic's public hook (`__get_pydantic_core_schema__`, placing
`core_schema.no_info_before_validator_function` as the model schema's documented `schema`
entry); the 25 of 40 RL classes that use no convention pay nothing (a `model_validator` on this
base class would run for every table: +10% on a whole check, measured).

Validation is strict (no string-to-number or number-to-bool coercion), so a generated class
accepts exactly what its schema accepts.

A field marked ``x-trainspec-lazy`` (sft's ``[eval]`` and ``[inference]``) is typed `LazyTable`
and names the generated module and class of its table (``sft_eval:EvalsEvalConfig``): the class
that holds it never imports that module, and its validator loads the table's class the first
time a config sets the table (`table_class`), so checking an SFT config without online evals
builds none of the orchestrator's classes. Errors inside the table keep their full path, and
dumps go through the table's own serializer. What does not reach the table is a per-call
option other than the validation context (`strict=False`, `from_attributes`): its class is
strict whatever the call asks, and trainspec passes none. A type checker reads the field as
`Any`; code that wants the table's type says it (validators/online_evals.py: `_evals`).

A field marked ``x-trainspec-as-written`` (a source's ``env`` and ``serve``, verifiers' own
tables) is dumped as it was set rather than with every default, so a resolved config read back
(as `rl` hands the orchestrator its config) hands the library the same table: `written`.
"""

from __future__ import annotations

import functools
import importlib
import types
import typing
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler
from pydantic_core import core_schema
from typing_extensions import TypeAliasType

from trainspec import validator_cache

NONE_STRING = "None"
SWITCH = "x-trainspec-switch"
AS_WRITTEN = "x-trainspec-as-written"
LAZY = "x-trainspec-lazy"
LazyTable: TypeAlias = Any  # a table loaded when set: its field's x-trainspec-lazy names it


@dataclass(frozen=True, slots=True)
class _FieldConventions:
    nullable: bool
    default_tag: str | None  # tag filled in when a table of a union field has no tag
    tag_key: str  # the union's discriminator: "type", or "name" for [renderer]
    switch: bool  # a sub-config that also takes true/false


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


def discriminator(annotation: Any) -> str:
    """The property a tagged union field is discriminated on (``type`` unless it says)."""
    if isinstance(annotation, TypeAliasType):
        return discriminator(annotation.__value__)
    if typing.get_origin(annotation) is typing.Annotated:
        for meta in typing.get_args(annotation)[1:]:
            if isinstance(getattr(meta, "discriminator", None), str):
                return meta.discriminator
        return discriminator(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            key = discriminator(arg)
            if key != "type":
                return key
    return "type"


def _default_tag(members: list[Any], key: str) -> str | None:
    for member in members:
        if isinstance(member, type) and issubclass(member, BaseModel):
            tag = member.model_fields.get(key)
            if tag is not None and not tag.is_required():
                return tag.default
    return None


def _conventions(cls: type[BaseModel]) -> dict[str, _FieldConventions]:
    found: dict[str, _FieldConventions] = {}
    for name, field in cls.model_fields.items():
        members = union_members(field.annotation)
        key = discriminator(field.annotation)
        tagged = [
            m
            for m in members
            if isinstance(m, type) and issubclass(m, BaseModel) and key in m.model_fields
        ]
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        conventions = _FieldConventions(
            nullable=type(None) in members,
            default_tag=_default_tag(tagged, key) if len(tagged) > 1 else None,
            tag_key=key,
            switch=bool(extra.get(SWITCH)),
        )
        if conventions.nullable or conventions.default_tag or conventions.switch:
            found[name] = conventions
    return found


def _as_written_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields a dump keeps as they were set (x-trainspec-as-written)."""
    extras = ((name, field.json_schema_extra) for name, field in cls.model_fields.items())
    return tuple(
        name for name, extra in extras if isinstance(extra, dict) and extra.get(AS_WRITTEN)
    )


def lazy_targets(cls: type[BaseModel]) -> dict[str, str]:
    """Field name -> "module:Class" of each lazily loaded table of `cls` (x-trainspec-lazy)."""
    extras = ((name, field.json_schema_extra) for name, field in cls.model_fields.items())
    targets = (
        (name, extra.get(LAZY) if isinstance(extra, dict) else None) for name, extra in extras
    )
    return {name: target for name, target in targets if isinstance(target, str)}


@functools.cache
def table_class(target: str) -> type[BaseModel]:
    """The class a lazy table names ("sft_eval:EvalsEvalConfig"), imported from
    trainspec.generated on first use, with its stored validator (trainspec.validator_cache)."""
    module, name = target.split(":")
    cls = getattr(importlib.import_module(f"trainspec.generated.{module}"), name)
    validator_cache.install(cls, target.replace(":", "."))
    return cls


@dataclass(frozen=True)
class _LoadTable:
    """The validator of a lazy table: loads the class on the first table it sees (picklable, for
    the validator cache: it holds only the target's name)."""

    target: str

    def __call__(self, value: Any, info: Any) -> Any:
        validator = table_class(self.target).__pydantic_validator__
        return validator.validate_python(value, context=info.context)

    def json_schema(self, _schema: Any, handler: Any) -> Any:
        return handler(table_class(self.target).__pydantic_core_schema__)


def _lazy_schema(schema: Any, load: _LoadTable) -> Any:
    """A field's schema with its `Any` (the LazyTable) replaced by the loading validator."""
    if schema.get("type") == "any":
        return core_schema.with_info_plain_validator_function(
            load, metadata={"pydantic_js_functions": [load.json_schema]}
        )
    if "schema" in schema:  # default, nullable, model-field
        return {**schema, "schema": _lazy_schema(schema["schema"], load)}
    raise TypeError(f"a lazy table's field schema has no Any inside: {schema}")


def _with_lazy_tables(fields_schema: Any, targets: dict[str, str]) -> Any:
    fields = dict(fields_schema["fields"])
    for name, target in targets.items():
        fields[name] = _lazy_schema(fields[name], _LoadTable(target))
    return {**fields_schema, "fields": fields}


def _convert(rule: _FieldConventions, value: Any) -> Any:
    """One value written with a TOML convention, as the generated field expects it."""
    if value == NONE_STRING and rule.nullable:
        return None
    if isinstance(value, bool) and rule.switch:
        return {} if value else None
    if isinstance(value, dict) and rule.default_tag and rule.tag_key not in value:
        return {**value, rule.tag_key: rule.default_tag}
    return value


class ConfigModel(BaseModel):
    """A config table: unknown keys are rejected, values are checked strictly, and non-finite
    numbers (TOML's nan and inf) are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        """The class's own schema, behind its fields' TOML conventions when it has any, and
        dumping its as-written fields as set."""
        schema = handler(source)
        targets = lazy_targets(cls)
        if targets and schema.get("type") == "model":
            schema = {**schema, "schema": _with_lazy_tables(schema["schema"], targets)}
        kept = _as_written_fields(cls)
        if kept and schema.get("type") == "model":
            dump = functools.partial(_as_written, kept)
            serializer = core_schema.wrap_serializer_function_ser_schema(dump, info_arg=True)
            schema = {**schema, "serialization": serializer}
        rules = _conventions(cls)
        if not rules:
            return schema
        convert = functools.partial(_apply, rules)
        if schema.get("type") == "model":  # in front of the fields, inside the model schema:
            # pydantic stores that schema once and reuses it wherever the class appears
            # ([data] and [val.data]), so every use converts
            inner = core_schema.no_info_before_validator_function(convert, schema["schema"])
            return {**schema, "schema": inner}
        return core_schema.no_info_before_validator_function(convert, schema)


def _apply(rules: dict[str, _FieldConventions], data: Any) -> Any:
    """The table as written, with its fields' conventions applied (a copy if any applies)."""
    if type(data) is not dict:
        return data
    converted = data
    for name, value in data.items():
        rule = rules.get(name)
        if rule is not None:
            new = _convert(rule, value)
            if new is not value:
                if converted is data:
                    converted = dict(data)
                converted[name] = new
    return converted


def written(table: Any) -> dict[str, Any]:
    """A table as its settings were written (nested, an open table's extra keys included,
    defaults left out); a plain dict as it is. What trainspec hands a library that applies its
    own defaults: a source's `env` and `serve` tables go to verifiers so, whose plugins may
    default differently from the schema's base tables. A resolved config keeps such a table as
    written (x-trainspec-as-written), so a dump read back hands over the same."""
    if isinstance(table, dict):
        return table
    return table.model_dump(exclude_unset=True)


def _as_written(names: tuple[str, ...], value: Any, handler: Any, info: Any) -> Any:
    """A table's dump with its as-written fields (x-trainspec-as-written) as they were set."""
    data = handler(value)
    if isinstance(data, dict):
        for name in names:
            table = getattr(value, name, None)
            if name in data and isinstance(table, BaseModel):
                data[name] = table.model_dump(mode=info.mode, exclude_unset=True)
    return data
