"""The two kinds of trainer config and their generated classes (imported on first use, so a
process that checks an RL config never builds the SFT classes)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Literal, get_args

if TYPE_CHECKING:
    from trainspec.generated.base_trainer import BaseTrainerConfig
    from trainspec.generated.rl_trainer import RLTrainerConfig
    from trainspec.generated.sft_trainer import SFTTrainerConfig

    TrainerConfig = RLTrainerConfig | SFTTrainerConfig

Kind = Literal["rl", "sft"]
KINDS: tuple[Kind, ...] = get_args(Kind)

CLASS_NAMES: dict[str, tuple[str, str]] = {
    "rl": ("trainspec.generated.rl_trainer", "RLTrainerConfig"),
    "sft": ("trainspec.generated.sft_trainer", "SFTTrainerConfig"),
}


def config_class(kind: str) -> type[BaseTrainerConfig]:
    try:
        module, name = CLASS_NAMES[kind]
    except KeyError:
        choices = ", ".join(KINDS)
        raise ValueError(f"unknown config kind {kind!r}; choose one of {choices}") from None
    return getattr(importlib.import_module(module), name)


def __getattr__(name: str):
    if name == "TrainerConfig":  # the union needs both classes: built only when asked for
        return config_class("rl") | config_class("sft")
    raise AttributeError(name)
