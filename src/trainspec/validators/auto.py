"""resolve_auto_defaults: settings whose default is "auto" and that resolve per mode.

The table itself lives in the schema: each such property carries
``"x-trainspec-auto": {"rl": ..., "sft": ...}`` (its description says the same for editor
hovers), and `make gen` copies it into the generated field's ``json_schema_extra``. This module
only reads it, so adding an auto setting is a schema edit.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from trainspec.config_model import ConfigModel, union_members

from .context import RuleContext

if TYPE_CHECKING:
    from trainspec.generated.base_trainer import BaseTrainerConfig

AUTO = "auto"
AUTO_KEY = "x-trainspec-auto"


def _auto_fields(cls: type[BaseModel], prefix: str, found: dict[str, dict[str, Any]]) -> None:
    for name, field in cls.model_fields.items():
        path = f"{prefix}{name}"
        extra = field.json_schema_extra
        per_mode = extra.get(AUTO_KEY) if isinstance(extra, dict) else None
        if isinstance(per_mode, dict):
            found[path] = per_mode
        for member in union_members(field.annotation):
            if isinstance(member, type) and issubclass(member, ConfigModel):
                _auto_fields(member, f"{path}.", found)


@functools.cache
def auto_table(cls: type[BaseModel]) -> dict[str, dict[str, Any]]:
    """Dotted path → {"rl": value, "sft": value} for every auto setting reachable from `cls`."""
    found: dict[str, dict[str, Any]] = {}
    _auto_fields(cls, "", found)
    return found


@functools.cache
def _steps(cls: type[BaseModel]) -> tuple[tuple[tuple[str, ...], str, dict[str, Any]], ...]:
    """(parent attributes, leaf, per-mode values) for each auto setting of `cls`."""
    steps = []
    for path, per_mode in auto_table(cls).items():
        *parents, leaf = path.split(".")
        steps.append((tuple(parents), leaf, per_mode))
    return tuple(steps)


def resolve_auto_defaults(cfg: BaseTrainerConfig, ctx: RuleContext) -> None:
    """Per-mode "auto" settings (e.g. optim.weight_decay) get the RL or the SFT trainer's value.

    These are the settings whose RL and SFT defaults differ, such as model.moe_router_dtype,
    model.freeze_moe_router and optim.weight_decay; each one's description gives both values."""
    for parents, leaf, per_mode in _steps(type(cfg)):
        table: Any = cfg
        for part in parents:
            table = getattr(table, part, None)
        if table is not None and getattr(table, leaf, None) == AUTO:
            ctx.resolve(table, leaf, per_mode[ctx.kind])
