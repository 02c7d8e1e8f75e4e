"""The kinds of config and their generated classes (imported on first use, so a process that
checks an RL config never builds the SFT classes).

`KINDS` are the two trainer configs (they share `base_trainer` and its rules); `ALL_KINDS` adds
the orchestrator's config and `rl_run`, the combined config of `rl` (schema rl.json: trainer and
orchestrator in one file)."""

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
AnyKind = Literal["rl", "sft", "orchestrator", "rl_run"]
ALL_KINDS: tuple[AnyKind, ...] = get_args(AnyKind)

CLASS_NAMES: dict[str, tuple[str, str]] = {
    "rl": ("trainspec.generated.rl_trainer", "RLTrainerConfig"),
    "sft": ("trainspec.generated.sft_trainer", "SFTTrainerConfig"),
    "orchestrator": ("trainspec.generated.orchestrator", "OrchestratorConfig"),
    "rl_run": ("trainspec.generated.rl", "RLConfig"),
}


def config_class(kind: str) -> type[BaseTrainerConfig]:
    try:
        module, name = CLASS_NAMES[kind]
    except KeyError:
        choices = ", ".join(ALL_KINDS)
        raise ValueError(f"unknown config kind {kind!r}; choose one of {choices}") from None
    return getattr(importlib.import_module(module), name)


def __getattr__(name: str):
    if name == "TrainerConfig":  # the union needs both classes: built only when asked for
        return config_class("rl") | config_class("sft")
    raise AttributeError(name)
