"""Resolved configs as TOML text that trainspec reads back to the same config."""

from __future__ import annotations

from typing import Any

from trainspec.config_model import NONE_STRING


def toml_ready(value: Any) -> Any:
    """`value` (a config dumped as JSON data) with every null written the way trainspec reads
    it back: TOML has no null, a nullable setting is turned off with "None"."""
    if value is None:
        return NONE_STRING
    if isinstance(value, dict):
        return {key: toml_ready(item) for key, item in value.items()}
    if isinstance(value, list):
        return [toml_ready(item) for item in value]
    return value
