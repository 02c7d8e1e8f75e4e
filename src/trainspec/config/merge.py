"""Combining config sources: tables deep-merge, everything else (arrays too) replaces.

Both walks are iterative: a document nested a thousand tables deep (refused later, in stage 0,
with its position) must not exhaust Python's recursion limit on the way there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Return `base` updated by `update`; nested tables merge key by key, other values replace.

    Neither input is modified: each table on a merged path is copied before it changes."""
    merged = dict(base)
    pending: list[tuple[dict[str, Any], Mapping[str, Any]]] = [(merged, update)]
    while pending:
        target, changes = pending.pop()
        for key, value in changes.items():
            old = target.get(key)
            if isinstance(old, Mapping) and isinstance(value, Mapping):
                child = target[key] = dict(old)
                pending.append((child, value))
            else:
                target[key] = value
    return merged


def merge_all(documents: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for document in documents:
        merged = deep_merge(merged, document)
    return merged


def unflatten(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``{"optim.lr": 1e-5}`` into ``{"optim": {"lr": 1e-5}}``; later keys win.

    A table given as a value (``{"optim": {...}, "optim.lr": 1e-5}``) is copied before a later
    dotted key writes into it, so the caller's dict is never changed."""
    nested: dict[str, Any] = {}
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        table = nested
        for part in parents:
            child = table.get(part)
            child = table[part] = dict(child) if isinstance(child, Mapping) else {}
            table = child
        table[leaf] = value
    return nested
