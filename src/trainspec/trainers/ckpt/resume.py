"""Which checkpoint a run starts from, from `[resume]`: `resume.dir`, `resume.step` of this run,
or this run's latest; each checked before anything loads.

    path = resolve_resume(config.resume, checkpointer)   # None: start fresh
    extra = checkpointer.load(path, ...)                  # when path is not None

With resume off (null) a run whose directory already holds checkpoints is refused rather than
overwriting them; a `resume.dir` must be a complete checkpoint (it holds meta.json).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import SetupError
from . import files
from .checkpointer import Checkpointer


def resolve_resume(resume_cfg, checkpointer: Checkpointer) -> Path | None:
    """The checkpoint to start from: `resume.dir`, else `resume.step` of this run, else this
    run's latest (the default); None when the run has no checkpoint yet. With resume off (null)
    a run that has checkpoints is refused: starting over would overwrite them."""
    if resume_cfg is None:
        latest = checkpointer.latest()
        if latest is None:
            return None
        steps = checkpointer.steps()
        raise SetupError(
            "resume",
            f"is off, and {checkpointer.directory} holds this run's checkpoints (steps "
            f"{', '.join(map(str, steps))}): starting over would overwrite them",
            f'drop resume = "None" (--no-resume) to continue from step {steps[-1]}; or start '
            "over deliberately: clean = true (sft), or delete the checkpoints; or give this "
            "run its own run.name / output_dir",
        )
    step, other_dir = resume_cfg.step, resume_cfg.dir
    if other_dir is not None:
        return _checked_dir(Path(other_dir))
    if step is not None:
        found = checkpointer.find(step)
        if found is None:
            available = checkpointer.steps()
            listing = (
                f"available steps: {', '.join(map(str, available))}"
                if available
                else "it holds no complete checkpoint"
            )
            raise SetupError(
                "resume.step",
                f"no checkpoint of step {step} in {checkpointer.directory} ({listing})",
                "pick one of the available steps, or drop resume.step to resume from the latest",
            )
        return found
    return checkpointer.latest()


def _checked_dir(path: Path) -> Path:
    if not path.is_dir():
        raise SetupError(
            "resume.dir",
            f"{path} does not exist" if not path.exists() else f"{path} is not a directory",
            "point resume.dir at a step_<N> directory inside another run's checkpoints",
        )
    if not files.is_complete(path):
        siblings = files.complete_steps(path.parent)
        hint = f"; complete steps beside it: {', '.join(map(str, siblings))}" if siblings else ""
        raise SetupError(
            "resume.dir",
            f"{path} is not a complete checkpoint (no {files.META}: its save did not finish, "
            f"or trainspec did not write it){hint}",
            "point resume.dir at a step_<N> directory that holds meta.json",
        )
    return path
