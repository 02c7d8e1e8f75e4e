"""Command-line overrides: `--optim.lr 1e-5`, `--max-steps 50`, `--model.compile`,
`--no-model.compile`, `--model.lora.target_modules '["q_proj"]'`.

Flags are config paths in kebab or snake case. A value is read as a JSON literal when it is one
the key accepts (numbers, true/false, null, arrays, tables), else as a string. A boolean or an
optional sub-table also works as a bare switch: `--x` turns it on, `--no-x` off.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainspec.config.merge import deep_merge, unflatten
from trainspec.config.sources import FlagSource
from trainspec.issues import ConfigIssue

if TYPE_CHECKING:
    from trainspec.config.schema_info import KeyInfo, SchemaInfo

SWITCH_VALUES = {"true", "false", "null", "None"}


@dataclass(slots=True)
class ParsedOverrides:
    source: FlagSource
    errors: list[ConfigIssue] = field(default_factory=list)


def flag_path(flag: str) -> tuple[bool, str]:
    """(negated, dotted snake-case path) of a `--flag` or `--no-flag`."""
    name = flag[2:].split("=", 1)[0]
    negated = name.startswith("no-") or name.startswith("no_")
    if negated:
        name = name[3:]
    return negated, name.replace("-", "_")


def takes_value(flag: str, following: str | None, info: SchemaInfo | None) -> bool:
    """Whether the token after `flag` is its value (used to tell values from file names)."""
    if "=" in flag or following is None or following.startswith("--"):
        return False
    negated, dotted = flag_path(flag)
    if negated:
        return False
    key = info.keys.get(tuple(dotted.split("."))) if info else None
    if key is not None and key.is_switch:
        return following in SWITCH_VALUES or following.startswith("{")
    if key is None:
        return not following.endswith(".toml")
    return True


class TooDeep(Exception):
    """A JSON value nested deeper than Python's parser goes."""


def convert(raw: str, key: KeyInfo | None) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    except RecursionError:
        raise TooDeep from None
    if key is None or key.accepts_type(value) or "string" not in key.types:
        return value
    return raw


def _switch(key: KeyInfo, negated: bool) -> Any:
    if "boolean" in key.types:
        return not negated
    return None if negated else {}


def parse(tokens: list[tuple[str, str | None]], info: SchemaInfo) -> ParsedOverrides:
    """Turn (flag, value or None) pairs into one override document and its flag map."""
    data: dict[str, Any] = {}
    flags: dict[tuple[str, ...], str] = {}
    errors: list[ConfigIssue] = []
    for flag, raw in tokens:
        name = flag.split("=", 1)[0]
        if "=" in flag:
            raw = flag.split("=", 1)[1]
        negated, dotted = flag_path(flag)
        try:
            data = _one(name, raw, negated, dotted, info, data, flags, errors)
        except TooDeep:
            errors.append(_too_deep(name, dotted))
    return ParsedOverrides(FlagSource(data, flags), errors)


def _too_deep(flag: str, dotted: str) -> ConfigIssue:
    return ConfigIssue(
        "error",
        dotted,
        "is a JSON value nested deeper than it can be read (about 1000 levels); no setting "
        "is nested like that",
        "check the brackets of the value",
        flag=flag,
    )


def _one(
    name: str,
    raw: str | None,
    negated: bool,
    dotted: str,
    info: SchemaInfo,
    data: dict[str, Any],
    flags: dict[tuple[str, ...], str],
    errors: list[ConfigIssue],
) -> dict[str, Any]:
    """`data` with one flag's value merged in (or an error appended to `errors`)."""
    path = tuple(dotted.split("."))
    key = info.keys.get(path)
    table = info.free_table(path) if key is None else None
    if table is not None:  # a key of a free-form table: --env-vars.NCCL_DEBUG WARN
        if raw is None:
            errors.append(_needs_value(name, dotted, "a value"))
            return data
        strings = (table.free_values or {}).get("type") == "string"
        data = deep_merge(data, unflatten({dotted: raw if strings else convert(raw, None)}))
        flags[path] = name
        return data
    if key is None:
        errors.append(_unknown(name, dotted, info, data))
        return data
    if negated and not key.is_switch and "null" in key.types:
        value = None  # --no-max-steps: back to null
    elif negated or raw is None:
        if not key.is_switch:
            errors.append(_needs_value(name, dotted, key.expected()))
            return data
        value = _switch(key, negated)
    else:
        value = convert(raw, key)
    data = deep_merge(data, unflatten({dotted: value}))
    flags[path] = name
    return data


def _needs_value(flag: str, dotted: str, expected: str) -> ConfigIssue:
    plain = "--" + flag[5:] if flag[2:5] in ("no-", "no_") else flag  # as the user spelled it
    return ConfigIssue(
        "error", dotted, f"needs a value: {expected}", f"write {plain} VALUE", flag=flag
    )


def _unknown(flag: str, dotted: str, info: SchemaInfo, data: dict[str, Any]) -> ConfigIssue:
    """`--max-step`: did you mean --max-steps? (in the spelling typed); `--optim.learning-rate`:
    the keys [optim] takes, as a file's unknown key gets them."""
    names = [".".join(path) for path in info.keys]
    close = _close_matches(dotted, names, n=1, cutoff=0.7)
    leaf = dotted.rsplit(".", 1)[-1]
    homes = [".".join(p) for p in info.where(leaf)]
    table = tuple(dotted.split(".")[:-1])
    parent = info.keys.get(table)
    negation = flag[2:5] if flag[2:5] in ("no-", "no_") else ""
    if homes:  # the exact setting under another table beats a look-alike
        flags = [spelled(flag, home, negation) for home in homes]
        fix = "did you mean " + " or ".join(flags) + "?"
    elif close:
        fix = f"did you mean {spelled(flag, close[0], negation)}?"
    elif parent is not None and parent.is_table:  # the keys of its table, as a file's typo
        from trainspec.config.schema_messages import valid_keys

        keys = valid_keys(table, info, _with_table(data, table))
        listed = ", ".join(spelled(flag, key)[2:] for key in keys)
        fix = f"[{'.'.join(table)}] takes: {listed} ({spelled(flag, '.'.join(table))}.KEY VALUE)"
    else:
        fix = "run with --help to list the sections and settings"
    return ConfigIssue("error", dotted, "is not a known setting", fix, flag=flag)


def spelled(flag: str, dotted: str, negation: str = "") -> str:
    """`--`, `negation` (`no-`) and `dotted` in the case `flag` was typed in: snake_case if it
    has `_` and no `-` (after a `--no-`), else kebab-case, the README's."""
    typed = flag[2:].split("=", 1)[0]
    if typed[:3] in ("no-", "no_"):
        typed = typed[3:]
    snake = "_" in typed and "-" not in typed
    return "--" + negation + (dotted if snake else dotted.replace("_", "-"))


def _with_table(data: dict[str, Any], table: tuple[str, ...]) -> dict[str, Any]:
    """The overrides so far, with `table` in them (empty if no flag set it): what the
    variant of a union table is read from."""
    found: Any = data
    for part in table:
        found = found.get(part) if isinstance(found, dict) else None
    nested: dict[str, Any] = found if isinstance(found, dict) else {}
    for part in reversed(table):
        nested = {part: nested}
    return nested


def _close_matches(word: str, choices, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """difflib's suggestions, imported only when there is something to suggest."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)
