"""Where a model or tokenizer name points: a built-in, a local directory, or a hub id.

    source = model_source(config.model.name, "model.name")   # str for from_pretrained

A name that looks like a path (it starts with `.`, `/` or `~`, or has more than the one slash of
`org/name`) is a local directory, and one that does not exist is refused here, naming what
writes it when that can be told (a checkpoint's `weights/` of a run a config in ./configs
trains), rather than sent to the hub as an id it cannot be.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from trainspec.config.steps import step_of_dir

from ..builtin import MODELS, PREFIX, builtin_model_dir, is_builtin
from ..errors import SetupError
from .hub import go_offline_unless_reachable

OFFLINE_FIX = "a local directory, or builtin:tiny-qwen3"


def looks_local(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists()


def model_source(name: str, field: str) -> str:
    """What `from_pretrained` should load for `name`, which came from `field`."""
    if is_builtin(name):
        directory = builtin_model_dir(name)
        if directory is None:
            known = ", ".join(PREFIX + key for key in MODELS)
            raise SetupError(field, f"{name!r} is not a built-in model", f"use one of: {known}")
        return str(directory)
    if not looks_local(name):
        go_offline_unless_reachable()  # one probe, rather than a minute of retries
        return name  # a hub id
    path = Path(name).expanduser()
    if path.is_dir():
        return str(path)
    problem = f"{name!r} is not a directory" if path.exists() else f"{name!r} does not exist"
    raise SetupError(field, problem, _what_writes(path) or f"point {field} at {OFFLINE_FIX}")


def _what_writes(path: Path) -> str | None:
    """For `<output_dir>/<run>/checkpoints/step_N/weights` (or `latest/weights`): which run
    writes it, and the command that trains it when a config under ./configs names that run."""
    parts = path.parts
    if len(parts) < 4 or parts[-1] != "weights" or parts[-3] != "checkpoints":
        return None
    step = step_of_dir(parts[-2])
    if step is None and parts[-2] != "latest":
        return None
    run_dir = Path(*parts[:-3])
    which = f"checkpoint step_{step}" if step is not None else "the latest checkpoint"
    said = f"it is the weights of {which} of the run in {run_dir}"
    for config in sorted(Path("configs").glob("**/*.toml")):
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        run = document.get("run")
        name = (run.get("dir") or run.get("name")) if isinstance(run, dict) else None
        output_dir = document.get("output_dir", "outputs")
        if isinstance(name, str) and Path(str(output_dir), name) == run_dir:
            return f"{said}: train that run first, `sft {config}`, then start this one"
    return f"{said}: train that run first, or point at weights that exist"
