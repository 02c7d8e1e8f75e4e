"""Stage 1: the merged document against the JSON Schema, every structural error at once.

The schema is the bundle editors use; jsonschema-rs validates it. Its errors are turned into
ConfigIssues that read like the rest of trainspec: the dotted path, what is wrong, the value, and
a suggestion (did-you-mean, or the section where an unknown key belongs).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from trainspec.issues import ConfigIssue, dotted, toml_value

from . import limits
from .bundle import bundled_schema

if TYPE_CHECKING:
    from .schema_info import KeyInfo, SchemaInfo

SHAPE_ERRORS = {"Type", "Constant", "Enum"}


@functools.cache
def _validator(kind: str):
    import jsonschema_rs

    return jsonschema_rs.validator_for(bundled_schema(kind))


_dotted = dotted


def _issue(path: tuple[Any, ...], message: str, fix: str, **extra: Any) -> ConfigIssue:
    return ConfigIssue("error", dotted(path), message, fix, key=tuple(path), **extra)


def _lookup(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _instance_path(error, data: Any) -> tuple[Any, ...]:
    """The error's location in `data`: jsonschema-rs gives a table key that looks like a number
    (`"0"` under [env_vars]) as an int, which only an array index may be."""
    path = []
    for part in error.instance_path:
        if isinstance(part, int) and isinstance(data, dict):
            part = str(part)
        path.append(part)
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            data = None
    return tuple(path)


def _schema_path(path: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(part for part in path if isinstance(part, str))


def integer_valued_floats(kind: str, data: dict[str, Any]) -> list[ConfigIssue]:
    """Floats such as 5.0 written where only an integer is allowed.

    JSON Schema counts 5.0 as an integer, TOML does not: it is a float, and the classes (strict)
    refuse it. trainspec refuses it in both stages, with the spelling to use."""
    from .schema_info import schema_info

    info = schema_info(kind)
    issues: list[ConfigIssue] = []
    stack: list[tuple[tuple[Any, ...], tuple[str, ...], Any]] = [((), (), data)]
    while stack:
        path, where, value = stack.pop()
        if isinstance(value, dict):
            if where and info.free_table((*where, "*")) is not None:
                continue  # a free-form table (loss.kwargs): any value goes
            stack.extend(((*path, k), (*where, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, n), (*where, "*"), v) for n, v in enumerate(value))
        elif isinstance(value, float) and value.is_integer():
            key = info.keys.get(where)
            if where and where[-1] == "*":
                parent = info.keys.get(where[:-1])
                key = parent.items if parent is not None else None
            if key is not None and "integer" in key.types and "number" not in key.types:
                exact = abs(value) < 2**53  # the float is exactly that integer
                fix = f"write {int(value)}, not {value!r}" if exact else "write an integer"
                issues.append(
                    _issue(path, f"must be an integer, got {value!r} (a float in TOML)", fix)
                )
    return sorted(issues, key=lambda issue: issue.path)


def check(kind: str, data: dict[str, Any]) -> list[ConfigIssue]:
    """Every structural error of `data` as a `kind` config; [] when the schema accepts it."""
    validator = _validator(kind)
    try:
        if validator.is_valid(data):
            # a nan in a nullable field reads as null here; stage 2 refuses it
            return integer_valued_floats(kind, data)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        return limits.check(data) or [
            ConfigIssue("error", "", f"cannot be checked: {exc}", "simplify the values")
        ]
    found = limits.check(data)  # what JSON cannot hold: the schema cannot judge it
    if found:
        return found
    from .schema_info import schema_info

    info = schema_info(kind)
    seen: dict[tuple[str, str], ConfigIssue] = {}
    schema = bundled_schema(kind)
    for error in validator.iter_errors(data):
        for issue in _translate(error, info, data, schema):
            seen.setdefault((issue.path, issue.message), issue)
    found = list(seen.values())
    reported = {issue.path for issue in found}
    return found + [i for i in integer_valued_floats(kind, data) if i.path not in reported]


def _kind(error) -> str:
    return type(error.kind).__name__


def _viable(branch: list, path: tuple[Any, ...], data: Any) -> bool:
    """Whether a union branch had the right shape and failed only further in."""
    for error in branch:
        where = _instance_path(error, data)
        if where == path and _kind(error) in SHAPE_ERRORS:
            return False
        if where == (*path, "type") and _kind(error) == "Constant":
            return False
        if where == path and _kind(error) == "Required" and error.kind.property == "type":
            return False  # a variant that needs `type`, for a table that left it out
    return True


def _translate(error, info: SchemaInfo, data: Any, schema: dict) -> Iterator[ConfigIssue]:
    path = _instance_path(error, data)
    kind = _kind(error)
    if kind in ("AnyOf", "OneOfNotValid"):
        branches = [branch for branch in error.kind.context if _viable(branch, path, data)]
        if branches:
            for inner in min(branches, key=len):
                yield from _translate(inner, info, data, schema)
        else:
            yield _wrong_shape(path, info, data)
    elif kind in ("AdditionalProperties", "UnevaluatedProperties"):
        for key in error.kind.unexpected:
            if not _is_known(path, key, info, data):
                yield _unknown_key(path, key, info, data)
    elif kind == "Required":
        name = error.kind.property
        yield _issue((*path, name), "is required", f"add {name}")
    elif kind == "PropertyNames":
        yield from _bad_names(path, info, data)
    else:
        yield _bad_value(path, kind, error, info, data)


def _variant(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> str | None:
    """The `type` a union table selects (its default variant when `type` is left out)."""
    where = _schema_path(path)
    if where not in info.variants:
        return None
    table = _lookup(data, path)
    tag = table.get("type") if isinstance(table, dict) else None
    if tag is None and where in info.keys:
        default = info.keys[where].default
        tag = default.get("type") if isinstance(default, dict) else None
    return tag if isinstance(tag, str) else None


def _valid_keys(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> list[str]:
    where = _schema_path(path)
    tag = _variant(path, info, data)
    if tag is not None:
        return info.variants[where].get(tag, [])
    return info.children.get(where, [])


def _is_known(path: tuple[Any, ...], key: str, info: SchemaInfo, data: Any) -> bool:
    """Keys a failed allOf part left "unevaluated" although the schema defines them."""
    return key in _valid_keys(path, info, data)


def _unknown_key(path: tuple[Any, ...], key: str, info: SchemaInfo, data: Any) -> ConfigIssue:
    where = _schema_path(path)
    valid = _valid_keys(path, info, data)
    close = _close_matches(key, valid, n=1, cutoff=0.6)
    elsewhere = [p for p in info.where(key) if p[:-1] != where]
    section = f"[{_dotted(where)}]" if where else "the top level"
    tag = _variant(path, info, data)
    owners = [t for t, keys in info.variants.get(where, {}).items() if key in keys]
    if not where and key in info.unsupported:
        return _issue(
            (*path, key),
            f"is a section of the reference (prime-rl) that trainspec does not support: "
            f"{info.unsupported[key]}",
            f"remove [{key}]",
            about_key=True,
        )
    if tag is not None and owners:
        names = " or ".join(json.dumps(t) for t in owners)
        fix = f'{key} is a setting of {_dotted(where)}.type {names}, not "{tag}"'
    elif elsewhere:  # the exact key of another table beats a look-alike in this one
        homes = " or ".join(
            f"[{_dotted(p[:-1])}]" if p[:-1] else "the top level" for p in elsewhere
        )
        fix = f"{key} belongs under {homes}, not {section}"
        if any(len(p) == 1 for p in elsewhere) and where:  # the classic TOML slip
            fix = (
                f"{key} is a top-level setting: TOML puts every key written after "
                f"[{_dotted(where)}] into that table, so move {key} above the first [table]"
            )
    elif close:
        fix = f"did you mean {_dotted((*path, close[0]))}?"
    else:
        fix = f"remove {dotted((key,))}; {section} takes: {', '.join(valid)}"
    return _issue((*path, key), f"is not a known key of {section}", fix, about_key=True)


def _wrong_shape(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> ConfigIssue:
    where = _schema_path(path)
    value = _lookup(data, path)
    tags = info.variants.get(where)
    if tags and isinstance(value, dict) and "type" in value:
        choices = list(tags)
        close = _close_matches(str(value["type"]), choices, n=1, cutoff=0.5)
        hint = f'did you mean "{close[0]}"?' if close else "pick one of the listed types"
        names = ", ".join(json.dumps(c) for c in choices)
        return _issue(
            (*path, "type"),
            f"is {toml_value(value['type'])}, not one of {names}",
            hint,
        )
    if tags and isinstance(value, dict):
        names = ", ".join(json.dumps(c) for c in tags)
        return _issue(
            (*path, "type"),
            f"is required: [{_dotted(where)}] has no default type",
            f"add type = one of {names}",
        )
    key: KeyInfo | None = info.keys.get(where)
    described = key
    if key is not None and path and isinstance(path[-1], int) and key.items is not None:
        key = key.items  # an array item: what the items take
    expected = key.expected() if key else "another kind of value"
    fix = f"write {expected} ({_describe_fix(described)})"
    if key is not None and isinstance(value, str) and key.choices:
        choices = [str(choice) for choice in key.choices]
        close = _close_matches(value, choices, n=1, cutoff=0.5)
        if close:
            fix = f'did you mean "{close[0]}"?'
    return _issue(path, f"should be {expected}, got {toml_value(value)}", fix)


def _describe_fix(key) -> str:
    if key is None or not key.description:
        return "see the schema for this key"
    return f"{key.dotted}: {key.description}"


def _bad_names(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> Iterator[ConfigIssue]:
    import jsonschema_rs

    key = info.keys.get(_schema_path(path))
    names_schema = key.property_names if key else None
    table = _lookup(data, path)
    if not names_schema or not isinstance(table, dict):
        return
    rule = jsonschema_rs.validator_for(names_schema)
    for name in table:
        if not rule.is_valid(name):
            yield _issue(
                (*path, name),
                f"is not allowed in [{_dotted(path)}]",
                f"remove {name}; {_describe_fix(key)}",
                about_key=True,
            )


def _bad_value(path, kind: str, error, info: SchemaInfo, data: Any) -> ConfigIssue:
    where = _schema_path(path)
    key = info.keys.get(where)
    value = _lookup(data, path)
    got = toml_value(value)
    limit = getattr(error.kind, "limit", None)
    action = None
    if kind == "Minimum":
        message, action = f"should be at least {limit}, got {got}", f"use {limit} or more"
    elif kind == "ExclusiveMinimum":
        message, action = f"should be greater than {limit}, got {got}", f"use more than {limit}"
    elif kind == "Maximum":
        message, action = f"should be at most {limit}, got {got}", f"use {limit} or less"
    elif kind == "ExclusiveMaximum":
        message, action = f"should be less than {limit}, got {got}", f"use less than {limit}"
    elif kind == "Enum":
        options = error.kind.options
        names = ", ".join(json.dumps(o) for o in options)
        message = f"should be one of {names}, got {got}"
        close = _close_matches(str(value), [str(o) for o in options], n=1, cutoff=0.5)
        if close:
            return _issue(path, message, f'did you mean "{close[0]}"?')
    elif kind == "Type":
        expected = key.expected() if key and len(path) == len(where) else None
        if not expected:
            words = {"integer": "an integer", "number": "a number", "string": "a string"}
            expected = " or ".join(words.get(t, t) for t in error.kind.types)
        message, action = f"should be {expected}, got {got}", f"write {expected}"
    elif kind == "Not" and key is not None and key.renamed_to:
        new = dotted((*path[:-1], key.renamed_to))
        return _issue(
            path,
            f"was renamed to {new}",
            f"write {key.renamed_to} = {got} instead, or run migrate-config on the file",
            about_key=True,
        )
    else:
        message = f"is invalid: {error.message}"
    fix = _describe_fix(key) if action is None else f"{action} ({_describe_fix(key)})"
    return _issue(path, message, fix)


def _close_matches(word: str, choices, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """difflib's suggestions, imported only when there is something to suggest."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)
