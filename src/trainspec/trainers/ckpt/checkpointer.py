"""Checkpoints, from `[ckpt]`: save the whole training state, find one, load it. Which one a
run starts from (`[resume]`) is resume.py's; the model and optimizer state, trainer_state.py's.

    checkpointer = Checkpointer(config.ckpt, run_dir, world)
    path = resolve_resume(config.resume, checkpointer)          # resume.py; None: start fresh
    extra = checkpointer.load(path, model=..., optimizer=..., scheduler=..., ckpt_cfg=config.ckpt)
    checkpointer.save(step, model=..., optimizer=..., scheduler=..., extra=..., export=...)

When to save (every ckpt.interval steps, on request, at the end) is the session's decision.

Layout of `<ckpt.output_dir or run_dir/checkpoints>/step_<N>/`:

    trainer/          model + optimizer (torch.distributed.checkpoint; any world size reloads it)
    rank_<r>.pt       per rank: scheduler state, the loop's `extra`, random number generators
    weights/          Hugging Face format: model.safetensors (+ what `export` writes)
    adapter/          LoRA runs: the peft adapter (adapter_config.json, adapter_model.safetensors)
    meta.json         written last: {"format", "step", "world_size", "run"}; marks it complete

and `latest`, a link to the checkpoint written last (`<run>/checkpoints/latest/weights` loads).
Loading runs no code from the files (a checkpoint may be someone else's): torch's pickles are
read restricted (safe_read.py), the per-rank files weights-only.

A save builds `.step_<N>.tmp` and renames it when complete (see files.py), so a process killed
at any point never leaves a `step_<N>` that `latest()` would pick.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.optim import Optimizer

from trainspec.config.steps import step_dir_name

from ..core.world import World, any_rank
from ..errors import RunError, SetupError, free_bytes, io_reason, size_text
from . import files
from .hf_export import Export, export_weights
from .safe_read import safe_load
from .trainer_state import check_same_model, trainer_state

log = logging.getLogger(__name__)

# Keys of `extra` that the skip_* flags drop on load; the loop stores its state under them.
DATA_KEY = "data"
PROGRESS_KEY = "progress"


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


class Checkpointer:
    """Saves and finds checkpoints of one run; with `ckpt_cfg` None (no [ckpt]) a save still goes
    to the default directory. `run` is the run's identity digest, recorded in every checkpoint it
    writes; a directory holding another run's checkpoints is refused (ckpt.output_dir shared by
    two runs), so retention and resume only ever see this run's."""

    def __init__(self, ckpt_cfg, run_dir: Path, world: World, run: str | None = None) -> None:
        output_dir = keep_last = keep_interval = None
        if ckpt_cfg is not None:
            output_dir = ckpt_cfg.output_dir
            keep_last, keep_interval = ckpt_cfg.keep_last, ckpt_cfg.keep_interval
        self.directory = Path(output_dir) if output_dir is not None else run_dir / "checkpoints"
        self.keep_last: int | None = keep_last
        self.keep_interval: int | None = keep_interval
        self.world = world
        self.run = run
        if output_dir is not None and run is not None:
            self._refuse_other_runs()

    def _refuse_other_runs(self) -> None:
        others = {}
        for step, path in files.complete_steps(self.directory).items():
            recorded = files.read_meta(path).get("run")
            if recorded is not None and recorded != self.run:
                others[step] = recorded
        if others:
            steps = ", ".join(f"step_{step}" for step in sorted(others))
            raise SetupError(
                "ckpt.output_dir",
                f"{self.directory} holds checkpoints of another run ({steps}, run "
                f"{sorted(set(others.values()))[0]}; this run is {self.run})",
                "give ckpt.output_dir a directory of this run's own, or drop it (checkpoints "
                "then go to the run directory)",
            )

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
        counters under "progress"); `export(weights_dir, hf_state_dict, adapter_dir)` runs on
        rank 0 after the weights are written. Returns the final directory.
        """
        files.check_plain(extra, "extra")
        rank_state = {
            "rng": files.capture_rng(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "extra": extra,
        }
        temp = files.temp_dir_for(self.directory, step)
        final = self.directory / step_dir_name(step)
        previous = self.latest()
        failure: BaseException | None = None
        if self.world.is_main:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                files.remove_stale(self.directory)
                temp.mkdir()
            except OSError as exc:
                failure = exc
        self._agree(failure, step, temp, previous)
        try:  # every rank or none: torch.distributed.checkpoint reports a failure on each
            dcp.save(trainer_state(model, optimizer), checkpoint_id=temp / files.TRAINER_DIR)
        except (Exception, CheckpointException) as exc:  # the latter is a BaseException
            failure = exc
        self._agree(failure, step, temp, previous)
        try:
            files.save_rank_state(files.rank_file(temp, self.world.rank), rank_state)
        except Exception as exc:
            failure = exc
        self._agree(failure, step, temp, previous)
        try:  # every rank gathers the weights; rank 0 writes them
            export_weights(
                model,
                temp / files.WEIGHTS_DIR,
                export,
                is_main=self.world.is_main,
                adapter_dir=temp / files.ADAPTER_DIR,
            )
            if self.world.is_main:
                files.fsync_tree(temp)
                files.write_meta(temp, step, self.world.world_size, self.run)
                files.publish(temp, final)
        except Exception as exc:
            failure = exc
        self._agree(failure, step, temp, previous)
        if self.world.is_main:
            self._retain(step)
            files.point_latest(self.directory, final)
            log.info("saved checkpoint %s", final)
        _barrier()
        return final

    def _agree(
        self, failure: BaseException | None, step: int, temp: Path, previous: Path | None
    ) -> None:
        """One answer on every rank: a write that failed anywhere stops the save everywhere,
        as a RunError that says why, what it needed and that the previous checkpoint stands."""
        if not any_rank(failure is not None, self.world):
            return
        if self.world.is_main:
            shutil.rmtree(temp, ignore_errors=True)  # nothing of the failed save is kept
        reason = io_reason(failure, self.directory) if failure is not None else None
        if failure is not None and reason is None:
            raise failure  # not the storage's doing: a bug, with its traceback
        what = reason or "another process could not write its part"
        free = free_bytes(self.directory)
        needed = files.tree_bytes(previous) if previous is not None else None
        room = f"{size_text(free)} free" if free is not None else "free space unknown"
        if needed:
            room += f"; the last checkpoint took {size_text(needed)}"
        kept = (
            f"{previous} is intact, and relaunching the same command resumes from it"
            if previous is not None
            else "no earlier checkpoint exists; relaunching starts the run over"
        )
        raise RunError(
            "ckpt.output_dir",
            f"checkpoint step_{step} could not be written to {self.directory}: {what} ({room})",
            f"free space on that disk (or point ckpt.output_dir at another); {kept}",
        )

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
        check_same_model(trainer_dir, get_model_state_dict(model), path)
        if optimizer is not None and not skip_optimizer:
            hyper = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
            state = trainer_state(model, optimizer)
            safe_load(state, trainer_dir)
            set_state_dict(
                model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
            )
            for group, settings in zip(optimizer.param_groups, hyper, strict=True):
                group.update(settings)
        else:
            state = {"model": get_model_state_dict(model)}
            safe_load(state, trainer_dir)
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
