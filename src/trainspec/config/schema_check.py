"""Stage 1: the merged document against the JSON Schema, every structural error at once.

The schema is the bundle editors use; jsonschema-rs validates it. Its errors are turned into
ConfigIssues that read like the rest of trainspec: the dotted path, what is wrong, the value, and
a suggestion (did-you-mean, or the section where an unknown key belongs); the words are
schema_messages.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from trainspec.issues import ConfigIssue, dotted

from . import limits
from .bundle import bundled_schema
from .schema_messages import (
    bad_names,
    bad_value,
    is_known,
    key_issue,
    unknown_key,
    wrong_shape,
)

if TYPE_CHECKING:
    from .schema_info import SchemaInfo

SHAPE_ERRORS = {"Type", "Constant", "Enum"}


@functools.cache
def _validator(kind: str):
    import jsonschema_rs

    return jsonschema_rs.validator_for(bundled_schema(kind))


_dotted = dotted


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


def integer_valued_floats(kind: str, data: dict[str, Any]) -> list[ConfigIssue]:
    """Floats such as 5.0 written where only an integer is allowed.

    JSON Schema counts 5.0 as an integer, TOML does not: it is a float, and the classes (strict)
    refuse it. trainspec refuses it in both stages, with the spelling to use."""
    from .schema_info import schema_info

    info = schema_info(kind)
    issues: list[ConfigIssue] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            inner, local = info.scope(path)  # a table of an array of tables: its own keys
            if local and inner.free_table((*local, "*")) is not None:
                continue  # a free-form table (loss.kwargs): any value goes
            stack.extend(((*path, k), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*path, n), v) for n, v in enumerate(value))
        elif isinstance(value, float) and value.is_integer():
            if path and isinstance(path[-1], int):  # an item of an array of numbers
                inner, local = info.scope(path[:-1])
                array = inner.keys.get(local)
                key = array.items if array is not None else None
            else:
                inner, local = info.scope(path)
                key = inner.keys.get(local)
            if key is not None and "integer" in key.types and "number" not in key.types:
                exact = abs(value) < 2**53  # the float is exactly that integer
                fix = f"write {int(value)}, not {value!r}" if exact else "write an integer"
                issues.append(
                    key_issue(path, f"must be an integer, got {value!r} (a float in TOML)", fix)
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


def _viable(branch: list, path: tuple[Any, ...], data: Any, tag: str) -> bool:
    """Whether a union branch had the right shape and failed only further in (`tag`: the key
    that picks the variant)."""
    for error in branch:
        where = _instance_path(error, data)
        if where == path and _kind(error) in SHAPE_ERRORS:
            return False
        if where == (*path, tag) and _kind(error) == "Constant":
            return False
        if where == path and _kind(error) == "Required" and error.kind.property == tag:
            return False  # a variant that needs its tag, for a table that left it out
    return True


def _translate(error, info: SchemaInfo, data: Any, schema: dict) -> Iterator[ConfigIssue]:
    path = _instance_path(error, data)
    kind = _kind(error)
    if kind in ("AnyOf", "OneOfNotValid"):
        inner, where = info.scope(path)
        tag = inner.tag_of(where)
        branches = [b for b in error.kind.context if _viable(b, path, data, tag)]
        if branches:
            for inner in min(branches, key=len):
                yield from _translate(inner, info, data, schema)
        else:
            yield wrong_shape(path, info, data)
    elif kind in ("AdditionalProperties", "UnevaluatedProperties"):
        for key in error.kind.unexpected:
            if not is_known(path, key, info, data):
                yield unknown_key(path, key, info, data)
    elif kind == "Required":
        name = error.kind.property
        yield key_issue((*path, name), "is required", f"add {name}")
    elif kind == "PropertyNames":
        yield from bad_names(path, info, data)
    else:
        yield bad_value(path, kind, error, info, data)
