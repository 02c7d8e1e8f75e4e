"""resolve_auto_defaults: settings whose default is "auto" and that resolve per mode.

The table itself lives in the schema: each such property carries
``"x-trainspec-auto": {"rl": ..., "sft": ...}`` (its description says the same for editor
hovers), and `make gen` copies it into the generated field's ``json_schema_extra``. This module
only reads it, so adding an auto setting is a schema edit. A lazily loaded table (sft's [eval],
trainspec.config_model) is walked when a config sets it, so checking a config without it loads
nothing more.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from trainspec.config_model import LAZY, ConfigModel, union_members

from .context import RuleContext

if TYPE_CHECKING:
    from trainspec.generated.base_trainer import BaseTrainerConfig

AUTO = "auto"
AUTO_KEY = "x-trainspec-auto"


def _auto_fields(
    cls: type[BaseModel], prefix: str, found: dict[str, dict[str, Any]], lazy: list[str]
) -> None:
    for name, field in cls.model_fields.items():
        path = f"{prefix}{name}"
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        per_mode = extra.get(AUTO_KEY)
        if isinstance(per_mode, dict):
            found[path] = per_mode
        if extra.get(LAZY):
            lazy.append(path)
        for member in union_members(field.annotation):
            if isinstance(member, type) and issubclass(member, ConfigModel):
                _auto_fields(member, f"{path}.", found, lazy)


@functools.cache
def _walk(cls: type[BaseModel]) -> tuple[dict[str, dict[str, Any]], tuple[tuple[str, ...], ...]]:
    """The auto settings reachable from `cls` without loading a lazy table, and the attributes
    that lead to each lazily loaded table."""
    found: dict[str, dict[str, Any]] = {}
    lazy: list[str] = []
    _auto_fields(cls, "", found, lazy)
    return found, tuple(tuple(path.split(".")) for path in lazy)


def auto_table(cls: type[BaseModel]) -> dict[str, dict[str, Any]]:
    """Dotted path → {"rl": value, "sft": value} for every auto setting reachable from `cls`
    without loading a lazy table (whose own settings are `auto_table` of its class)."""
    return _walk(cls)[0]


@functools.cache
def _steps(cls: type[BaseModel]) -> tuple[tuple[tuple[str, ...], str, dict[str, Any]], ...]:
    """(parent attributes, leaf, per-mode values) for each auto setting of `cls`."""
    steps = []
    for path, per_mode in auto_table(cls).items():
        *parents, leaf = path.split(".")
        steps.append((tuple(parents), leaf, per_mode))
    return tuple(steps)


def _follow(table: Any, parts: Sequence[str]) -> Any:
    for part in parts:
        table = getattr(table, part, None)
    return table


def resolve_auto_defaults(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """Per-mode "auto" settings (e.g. optim.weight_decay) get the RL or the SFT trainer's value.

    These are the settings whose RL and SFT defaults differ, such as model.moe_router_dtype,
    model.freeze_moe_router and optim.weight_decay; each one's description gives both values."""
    for parents, leaf, per_mode in _steps(type(cfg)):
        table = _follow(cfg, parents)
        if table is not None and getattr(table, leaf, None) == AUTO:
            ctx.resolve(table, leaf, per_mode[ctx.kind])
    for parts in _walk(type(cfg))[1]:  # the lazily loaded tables a config sets: theirs
        table = _follow(cfg, parts)
        if table is not None:
            resolve_auto_defaults(table, ctx)
