"""trainspec's config layer: schema-generated classes, handwritten rules, the loader.

Imports neither torch nor transformers.

    from trainspec.config import load
    resolved = load("rl", ["configs/rl/qwen3-0.6b.toml"], {"optim.lr": 1e-5})
    resolved.config.optim.weight_decay   # 0.0: "auto" resolved for RL
"""

from trainspec.issues import ConfigError, ConfigIssue

from .kinds import KINDS, Kind, config_class
from .loader import Outcome, Resolved, check_sources, dump_json, load, validate
from .sources import ConfigFileError, FileSource, FlagSource, read_file

__all__ = [
    "KINDS",
    "ConfigError",
    "ConfigFileError",
    "ConfigIssue",
    "Kind",
    "Resolved",
    "TrainerConfig",
    "config_class",
    "dump_json",
    "load",
    "Outcome",
    "FileSource",
    "FlagSource",
    "check_sources",
    "read_file",
    "validate",
]


def __getattr__(name: str):
    if name == "TrainerConfig":
        from . import kinds

        return kinds.TrainerConfig
    raise AttributeError(name)
