"""The generated class of each kind of config (imported on first use, so a process that checks
an RL config never builds the SFT classes). The kinds themselves are listed once, in
`trainspec.kinds`; `KINDS` here are the two trainer kinds."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainspec import validator_cache
from trainspec.kinds import ALL_KINDS, KIND_INFO, TRAINER_KINDS, Kind, TrainerKind

if TYPE_CHECKING:
    from trainspec.generated.base_trainer import BaseTrainerConfig
    from trainspec.generated.rl_trainer import RLTrainerConfig
    from trainspec.generated.sft_trainer import SFTTrainerConfig

    TrainerConfig = RLTrainerConfig | SFTTrainerConfig

__all__ = ["ALL_KINDS", "KINDS", "Kind", "TrainerKind", "config_class", "document_hook"]
KINDS: tuple[TrainerKind, ...] = TRAINER_KINDS
_loaded: dict[str, Any] = {}


def config_class(kind: str) -> type[BaseTrainerConfig]:
    try:
        info = KIND_INFO[kind]  # type: ignore[index]
    except KeyError:
        choices = ", ".join(ALL_KINDS)
        raise ValueError(f"unknown config kind {kind!r}; choose one of {choices}") from None
    cls = _loaded.get(kind)
    if cls is None:
        module = importlib.import_module(f"trainspec.generated.{info.module}")
        cls = _loaded[kind] = getattr(module, info.class_name)
        validator_cache.install(cls, kind)
    return cls


def document_hook(kind: str) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """The kind's document hook (trainspec.kinds), imported on first use; None for most kinds."""
    target = KIND_INFO[kind].document_hook  # type: ignore[index]
    if target is None:
        return None
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def __getattr__(name: str):
    if name == "TrainerConfig":  # the union needs both classes: built only when asked for
        return config_class("rl") | config_class("sft")
    raise AttributeError(name)
