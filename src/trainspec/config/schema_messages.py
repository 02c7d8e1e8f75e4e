"""The words of a stage-1 report: what an unknown key, a value of the wrong shape, a bad name or a
bad value is called, and its fix (did-you-mean, the section where a key belongs, the variant
that has it). schema_check.py decides which error is which; this module says it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from trainspec.issues import ConfigIssue, dotted, toml_value
from trainspec.schema_walk import objects

if TYPE_CHECKING:
    from .schema_info import KeyInfo, SchemaInfo

_dotted = dotted


def key_issue(path: tuple[Any, ...], message: str, fix: str, **extra: Any) -> ConfigIssue:
    return ConfigIssue("error", dotted(path), message, fix, key=tuple(path), **extra)


def lookup(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def schema_path(path: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(part for part in path if isinstance(part, str))


def variant(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> str | None:
    """The tag (`type`, or the union's own key) a union table selects (its default variant
    when the tag is left out)."""
    info, where = info.scope(path)
    if where not in info.variants:
        return None
    key = info.tag_of(where)
    table = lookup(data, path)
    tag = table.get(key) if isinstance(table, dict) else None
    if tag is None and where in info.keys:
        default = info.keys[where].default
        tag = default.get(key) if isinstance(default, dict) else None
    return tag if isinstance(tag, str) else None


def valid_keys(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> list[str]:
    tag = variant(path, info, data)
    info, where = info.scope(path)
    if tag is not None:
        return info.variants[where].get(tag, [])
    table = info.free_table(where) if where else None
    if table is not None and table.free_values:  # a table of a free-form table of tables
        return [
            key for shape in objects(info.schema, table.free_values) for key in shape.properties
        ]
    return info.children.get(where, [])


def is_known(path: tuple[Any, ...], key: str, info: SchemaInfo, data: Any) -> bool:
    """Keys a failed allOf part left "unevaluated" although the schema defines them."""
    return key in valid_keys(path, info, data)


def unknown_key(path: tuple[Any, ...], key: str, info: SchemaInfo, data: Any) -> ConfigIssue:
    where = schema_path(path)
    valid = valid_keys(path, info, data)
    close = close_matches(key, valid, n=1, cutoff=0.6)
    inner, local = info.scope(path)
    above = where[: len(where) - len(local)]  # the array of tables `path` is inside, if any
    found = [*info.where(key), *((*above, *p) for p in inner.where(key) if inner is not info)]
    elsewhere = [p for p in dict.fromkeys(found) if p[:-1] != where]
    section = f"[{_dotted(where)}]" if where else "the top level"
    tag = variant(path, info, data)
    owners = [t for t, keys in inner.variants.get(local, {}).items() if key in keys]
    if (why := info.unsupported.get((*where, key))) is not None:
        return key_issue(
            (*path, key),
            f"is a setting of prime-rl that trainspec leaves out: {why}",
            f"remove [{_dotted((*where, key))}]",
            about_key=True,
        )
    if tag is not None and owners:
        names = " or ".join(json.dumps(t) for t in owners)
        fix = f'{key} is a setting of {_dotted((*where, inner.tag_of(local)))} {names}, not "{tag}"'
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
    elif not where and (other := other_commands(info, key)):
        fix = other
    else:
        fix = f"remove {dotted((key,))}; {section} takes: {', '.join(valid)}"
    return key_issue((*path, key), f"is not a known key of {section}", fix, about_key=True)


def other_commands(info: SchemaInfo, key: str) -> str | None:
    """For a top-level key that another command's config has ([slurm] in an rl-trainer file):
    which commands take it, and how to get there from this one."""
    from trainspec.kinds import KIND_INFO

    from .schema_info import schema_info

    if info.kind not in KIND_INFO:
        return None
    mine = KIND_INFO[info.kind].command
    takers = [
        other.command
        for kind, other in KIND_INFO.items()
        if kind != info.kind and key in schema_info(kind).children.get((), [])
    ]
    if not takers:
        return None
    quoted = [f"`{command}`" for command in takers]
    names = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"
    fix = f"{key} is a setting of the {names} config{'s' if len(takers) > 1 else ''}, not {mine}'s"
    if "rl" in takers and mine in ("rl-trainer", "orchestrator"):
        table = "[trainer]" if mine == "rl-trainer" else "[orchestrator]"
        return f"{fix}: run `rl`, which starts {mine}, with this file's settings under {table}"
    return f"{fix}: run the file with {quoted[0]}, or remove {key}"


def wrong_shape(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> ConfigIssue:
    item = bool(path) and isinstance(path[-1], int)  # an item of an array: what items take
    info, where = info.scope(path[:-1] if item else path)
    value = lookup(data, path)
    tags = None if item else info.variants.get(where)
    tag = info.tag_of(where)
    if tags and isinstance(value, dict) and tag in value:
        choices = list(tags)
        close = close_matches(str(value[tag]), choices, n=1, cutoff=0.5)
        hint = f'did you mean "{close[0]}"?' if close else f"pick one of the listed {tag}s"
        names = ", ".join(json.dumps(c) for c in choices)
        return key_issue(
            (*path, tag),
            f"is {toml_value(value[tag])}, not one of {names}",
            hint,
        )
    if tags and isinstance(value, dict):
        names = ", ".join(json.dumps(c) for c in tags)
        return key_issue(
            (*path, tag),
            f"is required: [{_dotted(schema_path(path))}] has no default {tag}",
            f"add {tag} = one of {names}",
        )
    key: KeyInfo | None = info.keys.get(where)
    described = key
    if key is not None and item and key.items is not None:
        key = key.items
    expected = key.expected() if key else "another kind of value"
    fix = f"write {expected} ({describe_fix(described)})"
    if key is not None and isinstance(value, str) and key.choices:
        choices = [str(choice) for choice in key.choices]
        close = close_matches(value, choices, n=1, cutoff=0.5)
        if close:
            fix = f'did you mean "{close[0]}"?'
    return key_issue(path, f"should be {expected}, got {toml_value(value)}", fix)


def describe_fix(key) -> str:
    if key is None or not key.description:
        return "see the schema for this key"
    return f"{key.dotted}: {key.description}"


def bad_names(path: tuple[Any, ...], info: SchemaInfo, data: Any) -> Iterator[ConfigIssue]:
    import jsonschema_rs

    inner, where = info.scope(path)
    key = inner.keys.get(where)
    names_schema = key.property_names if key else None
    table = lookup(data, path)
    if not names_schema or not isinstance(table, dict):
        return
    rule = jsonschema_rs.validator_for(names_schema)
    for name in table:
        if not rule.is_valid(name):
            yield key_issue(
                (*path, name),
                f"is not allowed in [{_dotted(path)}]",
                f"remove {name}; {describe_fix(key)}",
                about_key=True,
            )


def bad_value(path, kind: str, error, info: SchemaInfo, data: Any) -> ConfigIssue:
    inner, where = info.scope(path)
    key = inner.keys.get(where)
    value = lookup(data, path)
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
        close = close_matches(str(value), [str(o) for o in options], n=1, cutoff=0.5)
        if close:
            return key_issue(path, message, f'did you mean "{close[0]}"?')
    elif kind == "Type":
        expected = key.expected() if key and not (path and isinstance(path[-1], int)) else None
        if not expected:
            words = {"integer": "an integer", "number": "a number", "string": "a string"}
            expected = " or ".join(words.get(t, t) for t in error.kind.types)
        message, action = f"should be {expected}, got {got}", f"write {expected}"
    elif kind == "Not" and key is not None and key.renamed_to:
        new = dotted((*path[:-1], key.renamed_to))
        return key_issue(
            path,
            f"was renamed to {new}",
            f"write {key.renamed_to} = {got} instead, or run migrate-config on the file",
            about_key=True,
        )
    else:
        message = f"is invalid: {error.message}"
    fix = describe_fix(key) if action is None else f"{action} ({describe_fix(key)})"
    return key_issue(path, message, fix)


def close_matches(word: str, choices, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """difflib's suggestions, imported only when there is something to suggest."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)
