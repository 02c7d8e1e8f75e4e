"""Combining config sources: tables deep-merge, everything else (arrays too) replaces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def deep_merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Return `base` updated by `update`; nested tables merge key by key, other values replace."""
    merged = dict(base)
    for key, value in update.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(old, value)
        else:
            merged[key] = value
    return merged


def merge_all(documents: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for document in documents:
        merged = deep_merge(merged, document)
    return merged


def unflatten(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``{"optim.lr": 1e-5}`` into ``{"optim": {"lr": 1e-5}}``; later keys win."""
    nested: dict[str, Any] = {}
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        table = nested
        for part in parents:
            child = table.get(part)
            if not isinstance(child, dict):
                child = table[part] = {}
            table = child
        table[leaf] = value
    return nested
