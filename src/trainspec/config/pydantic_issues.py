"""Pydantic's validation errors as config issues: the key path into the document (without the
union-member labels pydantic adds), what is wrong and how to fix it. Used when the classes reject
a document the JSON Schema accepts (rare: the parity proof keeps the two in step)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from trainspec.issues import ConfigIssue, dotted


def has_key(container: Any, key: Any) -> bool:
    if isinstance(container, Mapping):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and 0 <= key < len(container)


def _document_path(loc: tuple[Any, ...], data: Any, missing: bool) -> tuple[Any, ...]:
    """The key path of a pydantic error location, without union-member labels."""
    parts: list[Any] = []
    current = data
    for index, element in enumerate(loc):
        if has_key(current, element):
            parts.append(element)
            current = current[element]
        elif missing and index == len(loc) - 1:
            parts.append(element)
    return tuple(parts)


def issues_from_pydantic(exc: ValidationError, data: Mapping[str, Any]) -> list[ConfigIssue]:
    grouped: dict[tuple[Any, ...], list[Any]] = {}
    for error in exc.errors(include_url=False):
        parts = _document_path(error["loc"], data, error["type"] == "missing")
        grouped.setdefault(parts, []).append(error)
    issues = []
    for parts, errors in grouped.items():
        if any(other[: len(parts)] == parts and other != parts for other in grouped):
            continue  # a union member with deeper errors: those say what is wrong
        kinds = {e["type"] for e in errors}
        path, key = dotted(parts), str(parts[-1]) if parts else ""
        if "extra_forbidden" in kinds:
            message, fix = "is not a known key", f"remove {key} or check its spelling"
        elif "missing" in kinds:
            message, fix = "is required", f"add {key}"
        else:
            wanted = dict.fromkeys(e["msg"].removeprefix("Input should be ") for e in errors)
            got = json.dumps(errors[0]["input"], default=str)
            message = f"should be {', or '.join(wanted)}; got {got}"
            fix = "correct the value (see the schema description of this key)"
        about_key = "extra_forbidden" in kinds
        issues.append(ConfigIssue("error", path, message, fix, about_key=about_key, key=parts))
    return issues
