"""What ships inside the package so the default demo runs with nothing downloaded.

`model.name = "builtin:tiny-qwen3"` (and `tokenizer.name`) name a directory here: a Qwen3-style
config.json and a byte-level tokenizer with a chat template (written by
scripts/build_builtin.py). The weights are not shipped: they are initialised from a seed on first
use. `data.name = "builtin:reverse-text"` names the generated task in
`trainspec.trainers.chat.tasks`.
"""

from __future__ import annotations

from pathlib import Path

PREFIX = "builtin:"
HERE = Path(__file__).resolve().parent
MODELS = {"tiny-qwen3": HERE / "tiny-qwen3"}


def is_builtin(name: str) -> bool:
    return name.startswith(PREFIX)


def builtin_model_dir(name: str) -> Path | None:
    """The directory of a built-in model name, or None when `name` is not one."""
    if not is_builtin(name):
        return None
    return MODELS.get(name.removeprefix(PREFIX))
