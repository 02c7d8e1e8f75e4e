"""Checkpoint step directories by name: `step_<N>`, shared by the config (resume.dir) and the
checkpoint code that reads and writes them."""

from __future__ import annotations

import re

STEP_DIR = re.compile(r"step_([0-9]+)")


def step_dir_name(step: int) -> str:
    return f"step_{step}"


def step_of_dir(path: str) -> int | None:
    """The step that the last part of `path` names (``runs/a/step_400/`` -> 400), else None."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    match = STEP_DIR.fullmatch(name)
    return int(match.group(1)) if match else None
