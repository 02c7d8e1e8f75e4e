"""The two kinds of trainer config and their generated classes."""

from __future__ import annotations

from typing import Literal, get_args

from trainspec.generated.base_trainer import BaseTrainerConfig
from trainspec.generated.rl_trainer import RLTrainerConfig
from trainspec.generated.sft_trainer import SFTTrainerConfig

Kind = Literal["rl", "sft"]
KINDS: tuple[Kind, ...] = get_args(Kind)

CONFIG_CLASSES: dict[Kind, type[BaseTrainerConfig]] = {
    "rl": RLTrainerConfig,
    "sft": SFTTrainerConfig,
}

TrainerConfig = RLTrainerConfig | SFTTrainerConfig


def config_class(kind: str) -> type[BaseTrainerConfig]:
    try:
        return CONFIG_CLASSES[kind]  # type: ignore[index]
    except KeyError:
        raise ValueError(
            f"unknown config kind {kind!r}; choose one of {', '.join(KINDS)}"
        ) from None
