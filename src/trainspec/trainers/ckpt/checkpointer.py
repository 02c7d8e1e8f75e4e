"""Checkpoints, from `[ckpt]` and `[resume]`: save the whole training state, find one, load it.

    checkpointer = Checkpointer(config.ckpt, run_dir, world)
    path = resolve_resume(config.resume, checkpointer)          # None: start fresh
    extra = checkpointer.load(path, model=..., optimizer=..., scheduler=..., ckpt_cfg=config.ckpt)
    checkpointer.save(step, model=..., optimizer=..., scheduler=..., extra=..., export=...)

When to save (every ckpt.interval steps, on request, at the end) is the session's decision.

Layout of `<ckpt.output_dir or run_dir/checkpoints>/step_<N>/`:

    trainer/          model + optimizer (torch.distributed.checkpoint; any world size reloads it)
    rank_<r>.pt       per rank: scheduler state, the loop's `extra`, random number generators
    weights/          Hugging Face format: model.safetensors (+ what `export` writes)
    meta.json         written last: {"format", "step", "world_size"}; marks the step complete

A save builds `.step_<N>.tmp` and renames it when complete (see files.py), so a process killed
at any point never leaves a `step_<N>` that `latest()` would pick.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.optim import Optimizer

from trainspec.config.steps import step_dir_name

from ..core.world import World
from ..errors import SetupError
from . import files
from .hf_export import Export, export_weights

log = logging.getLogger(__name__)

# Keys of `extra` that the skip_* flags drop on load; the loop stores its state under them.
DATA_KEY = "data"
PROGRESS_KEY = "progress"


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


class Checkpointer:
    """Saves and finds checkpoints of one run; with `ckpt_cfg` None (no [ckpt]) a save still goes
    to the default directory."""

    def __init__(self, ckpt_cfg, run_dir: Path, world: World) -> None:
        output_dir = keep_last = keep_interval = None
        if ckpt_cfg is not None:
            output_dir = ckpt_cfg.output_dir
            keep_last, keep_interval = ckpt_cfg.keep_last, ckpt_cfg.keep_interval
        self.directory = Path(output_dir) if output_dir is not None else run_dir / "checkpoints"
        self.keep_last: int | None = keep_last
        self.keep_interval: int | None = keep_interval
        self.world = world

    # -- finding -----------------------------------------------------------------------------

    def steps(self) -> list[int]:
        """Steps of the complete checkpoints, oldest first."""
        return list(files.complete_steps(self.directory))

    def latest(self) -> Path | None:
        found = files.complete_steps(self.directory)
        return found[max(found)] if found else None

    def find(self, step: int) -> Path | None:
        return files.complete_steps(self.directory).get(step)

    # -- saving ------------------------------------------------------------------------------

    def save(
        self,
        step: int,
        *,
        model: nn.Module,
        optimizer: Optimizer | None,
        scheduler: Any,
        extra: dict[str, Any],
        export: Export | None = None,
    ) -> Path:
        """Write step_<step> (a collective: every rank calls it) and apply retention.

        `extra` is this rank's plain state (data-loader position under "data", progress
        counters under "progress"); `export(weights_dir, hf_state_dict)` runs on rank 0 after
        the weights are written. Returns the final directory.
        """
        files.check_plain(extra, "extra")
        rank_state = {
            "rng": files.capture_rng(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "extra": extra,
        }
        temp = files.temp_dir_for(self.directory, step)
        final = self.directory / step_dir_name(step)
        if self.world.is_main:
            self.directory.mkdir(parents=True, exist_ok=True)
            files.remove_stale(self.directory)
            temp.mkdir()
        _barrier()
        dcp.save(_trainer_state(model, optimizer), checkpoint_id=temp / files.TRAINER_DIR)
        files.save_rank_state(files.rank_file(temp, self.world.rank), rank_state)
        export_weights(model, temp / files.WEIGHTS_DIR, export, is_main=self.world.is_main)
        _barrier()
        if self.world.is_main:
            files.fsync_tree(temp)
            files.write_meta(temp, step, self.world.world_size)
            files.publish(temp, final)
            self._retain(step)
            log.info("saved checkpoint %s", final)
        _barrier()
        return final

    def _retain(self, current: int) -> None:
        found = files.complete_steps(self.directory)
        doomed = files.steps_to_delete(
            list(found),
            keep_last=self.keep_last,
            keep_interval=self.keep_interval,
            current=current,
        )
        for step in doomed:
            files.delete(found[step])
            log.info("deleted checkpoint %s (ckpt.keep_last = %s)", found[step], self.keep_last)

    # -- loading -----------------------------------------------------------------------------

    def load(
        self,
        path: Path,
        *,
        model: nn.Module,
        optimizer: Optimizer | None,
        scheduler: Any,
        ckpt_cfg,
    ) -> dict[str, Any]:
        """Restore `path` into the training state (a collective) and return this rank's `extra`.

        The model always; the optimizer's state unless ckpt.skip_optimizer (its hyperparameters
        stay this run's config); the schedule unless ckpt.skip_scheduler (the learning rate then
        follows whichever schedule is in force); the random generators always. "data" is left
        out of the result under ckpt.skip_dataloader, "progress" under ckpt.skip_progress.
        """
        skip_optimizer = skip_scheduler = skip_dataloader = skip_progress = False
        if ckpt_cfg is not None:
            skip_optimizer, skip_scheduler = ckpt_cfg.skip_optimizer, ckpt_cfg.skip_scheduler
            skip_dataloader, skip_progress = ckpt_cfg.skip_dataloader, ckpt_cfg.skip_progress
        path = Path(path)
        trainer_dir = path / files.TRAINER_DIR
        if optimizer is not None and not skip_optimizer:
            hyper = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
            state = _trainer_state(model, optimizer)
            dcp.load(state, checkpoint_id=trainer_dir)
            set_state_dict(
                model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
            )
            for group, settings in zip(optimizer.param_groups, hyper, strict=True):
                group.update(settings)
        else:
            state = {"model": get_model_state_dict(model)}
            dcp.load(state, checkpoint_id=trainer_dir)
            set_model_state_dict(model, state["model"])

        rank_state = files.load_rank_state(path, self.world.rank)
        if scheduler is not None:
            if not skip_scheduler and rank_state["scheduler"] is not None:
                scheduler.load_state_dict(rank_state["scheduler"])
            if optimizer is not None:
                for group, lr in zip(optimizer.param_groups, scheduler.get_last_lr(), strict=True):
                    group["lr"] = lr
        files.restore_rng(rank_state["rng"])
        extra = dict(rank_state["extra"])
        if skip_dataloader:
            extra.pop(DATA_KEY, None)
        if skip_progress:
            extra.pop(PROGRESS_KEY, None)
        return extra


def _trainer_state(model: nn.Module, optimizer: Optimizer | None) -> dict[str, Any]:
    """Model (and optimizer) state in the form torch.distributed.checkpoint saves and loads:
    plain tensors for one process, DTensor shards under FSDP."""
    if optimizer is None:
        return {"model": get_model_state_dict(model)}
    model_state, optim_state = get_state_dict(model, optimizer)
    return {"model": model_state, "optim": optim_state}


def resolve_resume(resume_cfg, checkpointer: Checkpointer) -> Path | None:
    """The checkpoint to start from: `resume.dir`, else `resume.step` of this run, else this
    run's latest; None when `[resume]` is absent or the run has no checkpoint yet."""
    if resume_cfg is None:
        return None
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
