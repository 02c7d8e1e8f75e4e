"""The kinds of config trainspec reads, and everything that goes by kind, in one table.

`rl` and `sft` are the trainer configs (they share `base_trainer` and its rules); `orchestrator`
is the RL orchestrator's config; `rl_run` is the combined config of the `rl` command (schema
rl.json: trainer and orchestrator in one file); `inference` is the `inference` command's (schema
inference_run.json: rl's [inference] table at the top level, with [slurm]); `eval` the `evaluate`
command's (schema eval.json: a model evaluated on eval sources). Imports nothing heavy: the
config layer, the rules and the scripts all read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Kind = Literal["rl", "sft", "orchestrator", "rl_run", "inference", "eval"]
TrainerKind = Literal["rl", "sft"]


@dataclass(frozen=True, slots=True)
class KindInfo:
    schema: str  # schema/<schema>.json; generated/schemas/<schema>.json is its bundle
    module: str  # the generated module and class of a config of this kind
    class_name: str
    rules: str  # the module whose <NAME>_RULES run after the shared ones (trainers only)
    shared_rules: bool  # the trainer kinds run the shared rules first
    command: str  # the command that reads a config of this kind (`sft @ x.toml`)
    # "module:function" that turns a structurally valid document into the one the classes build
    # (the combined config copies its shared settings into both sub-configs), or None
    document_hook: str | None = None
    # its dry run is the command's own (what it would start, written down), not --print-config
    launch_dry_run: bool = False


KIND_INFO: dict[Kind, KindInfo] = {
    "rl": KindInfo("rl_trainer", "rl_trainer", "RLTrainerConfig", "rl", True, "rl-trainer"),
    "sft": KindInfo("sft_trainer", "sft_trainer", "SFTTrainerConfig", "sft", True, "sft"),
    "orchestrator": KindInfo(
        "orchestrator", "orchestrator", "OrchestratorConfig", "orchestrator", False, "orchestrator"
    ),
    "rl_run": KindInfo(
        "rl",
        "rl",
        "RLConfig",
        "rl_run",
        False,
        "rl",
        "trainspec.validators.rl_run:propagate_shared",
        launch_dry_run=True,
    ),
    "inference": KindInfo(
        "inference_run",
        "inference_run",
        "InferenceRunConfig",
        "inference",
        False,
        "inference",
        launch_dry_run=True,
    ),
    "eval": KindInfo("eval", "eval", "EvalsConfig", "eval", False, "evaluate"),
}
ALL_KINDS: tuple[Kind, ...] = get_args(Kind)
TRAINER_KINDS: tuple[TrainerKind, ...] = get_args(TrainerKind)
SCHEMA_NAMES: dict[Kind, str] = {kind: info.schema for kind, info in KIND_INFO.items()}


def kind_of_schema(name: str) -> Kind | None:
    """The kind whose schema is `name` ("rl_trainer", or a path ending in rl_trainer.json)."""
    stem = name.rstrip("/").rsplit("/", 1)[-1].removesuffix(".json")
    return next((kind for kind, info in KIND_INFO.items() if info.schema == stem), None)
