"""Stage 0: what no trainer setting can hold, refused on the merged document before the schema.

Files, command-line flags and the Python API's overrides and documents all merge into one
document, so this one walk covers every source; each issue is then located in the source that
set its path (`file.toml:12:7`, `--max-steps`). It refuses:

- nesting deeper than MAX_DEPTH levels (the deepest setting is a handful of levels down; the
  later stages and the JSON dump recurse, and would crash on absurd depth);
- integers outside 64 bits: TOML's range, and what the trainers (torch, C) can take;
- non-finite floats (nan, inf): JSON has no spelling for them, so the dump would not re-parse;
- TOML dates and times: no setting takes one, and JSON has none (the dump would not round-trip);
- from the Python API, keys that are not strings and values no config file can hold.

The walk is iterative and stops at MAX_DEPTH, so no document (even a cyclic one) can crash it.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from trainspec.issues import ConfigIssue, dotted

MAX_DEPTH = 24  # levels of keys and array items from the top; far deeper than any setting
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def describe_integer(value: int) -> str:
    """`value` as text; one of thousands of digits (which `str` refuses) by its size."""
    if value.bit_length() <= 256:
        return str(value)
    digits = int(value.bit_length() * math.log10(2)) + 1
    return f"{'-' if value < 0 else ''}an integer of about {digits} digits"


def in_int64(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


INT64_FIX = f"use an integer from {INT64_MIN} to {INT64_MAX}"


def check(document: Mapping[str, Any]) -> list[ConfigIssue]:
    """Every stage-0 issue of `document`, in document order; [] for every sane config."""
    issues: list[ConfigIssue] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), document)]
    too_deep: set[tuple[Any, ...]] = set()
    while stack:
        path, value = stack.pop()
        if len(path) > MAX_DEPTH:
            where = path[:MAX_DEPTH]
            if where not in too_deep:  # one report for each table or array that goes too deep
                too_deep.add(where)
                issues.append(_too_deep(where))
            continue
        if isinstance(value, Mapping):
            issues.extend(_bad_key(path, key) for key in value if not isinstance(key, str))
            items = [((*path, key), item) for key, item in value.items() if isinstance(key, str)]
            stack.extend(reversed(items))
        elif isinstance(value, list):
            stack.extend(reversed([((*path, n), item) for n, item in enumerate(value)]))
        else:
            issue = _bad_scalar(path, value)
            if issue is not None:
                issues.append(issue)
    return issues


def _issue(path: tuple[Any, ...], message: str, fix: str, **extra: Any) -> ConfigIssue:
    return ConfigIssue("error", dotted(path), message, fix, key=path, **extra)


def _too_deep(path: tuple[Any, ...]) -> ConfigIssue:
    return _issue(
        path,
        f"is nested more than {MAX_DEPTH} levels deep",
        "no trainspec setting is nested this deeply; check the table headers and brackets",
    )


def _bad_key(path: tuple[Any, ...], key: Any) -> ConfigIssue:
    return _issue(
        path,
        f"has a key that is not a string: {key!r} ({type(key).__name__})",
        "use string keys, as a TOML file would",
    )


def _bad_scalar(path: tuple[Any, ...], value: Any) -> ConfigIssue | None:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, int):
        if in_int64(value):
            return None
        text = describe_integer(value)
        return _issue(path, f"is outside the 64-bit integer range: {text}", INT64_FIX)
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return _issue(path, f"must be a finite number, got {value}", "use a number")
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date too
        return _issue(
            path,
            f"is a TOML date or time ({value.isoformat()}); no setting takes one",
            "quote it if you meant a string",
        )
    if isinstance(value, (tuple, set, frozenset)):  # the classes take only lists
        fix = f"pass a list instead of a {type(value).__name__}"
    else:
        fix = "pass a str, int, float, bool, None, list or dict"
    return _issue(path, f"is a Python {type(value).__name__}, which no config file can hold", fix)
