"""What both training loops train with, each part built from its own sub-config: the tokenizer,
the parallelised model, the optimizer (and its state offload), the schedule, the checkpointer
and the Hugging Face exporter.

    parts = Parts.build(config, "sft", world, run_dir, seed=config.data.seed)
    step, state = parts.resume(config.resume)         # 0 and {} on a fresh start
    for mb in parts.accumulate(micro_batches):        # gradient sync on the last one only
        with parts.offloaded_activations():
            loss = summed_loss(parts.model, ...)
        loss.backward()
    metrics = parts.update()                          # clip, step, schedule, zero: grad_norm, lr
    parts.save(step, state)                           # state: the loop's own (data position, ...)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

from trainspec.kinds import TrainerKind
from trainspec.run_identity import identity_digest, run_identity

from .ckpt.checkpointer import PROGRESS_KEY, Checkpointer
from .ckpt.hf_export import Export, hf_exporter
from .ckpt.resume import resolve_resume
from .core.lm import ChunkedLM
from .core.model import build_model
from .core.optim import StateOffload, build_optimizer, build_scheduler, clip_gradients
from .core.parallel import apply_parallelism
from .core.tokenizer import build_tokenizer
from .core.world import World

log = logging.getLogger(__name__)
MicroBatch = TypeVar("MicroBatch")


def run_digest(config, kind: TrainerKind) -> str:
    return identity_digest(run_identity(config, kind))


@dataclass
class Parts:
    config: Any  # the trainer config the parts were built from
    world: World
    tokenizer: Any
    model: ChunkedLM  # wrapped for activation checkpointing, compile and FSDP as configured
    optimizer: Optimizer
    scheduler: LRScheduler
    offload: StateOffload
    checkpointer: Checkpointer
    export: Export
    start_step: int = 0  # where training starts: the step `resume` loaded, else 0
    resumed_from: Path | None = None  # the checkpoint `resume` loaded

    @classmethod
    def build(cls, config, kind: TrainerKind, world: World, run_dir: Path, *, seed: int) -> Parts:
        """Every part from its own table; `seed` initialises a model without weights. The
        checkpoints carry the run's identity digest (trainspec.run_identity)."""
        tokenizer = build_tokenizer(config.tokenizer, config.model)
        # Rank 0 alone reads the weights; the others build shapes only and get their shards.
        lm = build_model(
            config.model, seed=seed, device_type=world.device.type, on_meta=not world.is_main
        )
        model = apply_parallelism(lm, config.model, world)
        optimizer = build_optimizer(config.optim, model, sharded=world.world_size > 1)
        return cls(
            config=config,
            world=world,
            tokenizer=tokenizer,
            model=model,
            optimizer=optimizer,
            scheduler=build_scheduler(config.scheduler, optimizer, max_steps=config.max_steps),
            offload=StateOffload(optimizer, config.model.optim_cpu_offload, world.device),
            checkpointer=Checkpointer(config.ckpt, run_dir, world, run=run_digest(config, kind)),
            export=hf_exporter(model.lm, tokenizer, config.model.lora),
        )

    def resume(self, resume_cfg) -> tuple[int, dict[str, Any]]:
        """Load the checkpoint `[resume]` names (a collective); the step it was saved at and this
        rank's loop state from it, or (0, {}) when there is none."""
        path = resolve_resume(resume_cfg, self.checkpointer)
        if path is None:
            log.info("starting fresh: %s holds no checkpoint", self.checkpointer.directory)
            return 0, {}
        state = self.checkpointer.load(
            path,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            ckpt_cfg=self.config.ckpt,
        )
        step = state.get(PROGRESS_KEY, {}).get("step", 0)
        log.info("resumed from %s at step %d", path, step)
        self.start_step, self.resumed_from = step, path
        return step, state

    def accumulate(self, micro_batches: Sequence[MicroBatch]) -> Iterator[MicroBatch]:
        """Each micro-batch of a step in turn; under FSDP the gradients are reduced once, in the
        backward of the last one."""
        sync = getattr(self.model, "set_requires_gradient_sync", None)
        for index, mb in enumerate(micro_batches):
            if sync is not None:
                sync(index == len(micro_batches) - 1)
            yield mb

    def offloaded_activations(self) -> contextlib.AbstractContextManager:
        """The forward's context: under `model.ac_offloading` on a GPU the activations autograd
        saves wait in host memory until backward; on a CPU they are there already."""
        offload = self.config.model.ac_offloading
        if offload is None or self.world.device.type != "cuda":
            return contextlib.nullcontext()
        return torch.autograd.graph.save_on_cpu(pin_memory=offload.pin_memory)

    def update(self) -> dict[str, float]:
        """The step's update: clip, step the optimizer at this step's learning rate, advance the
        schedule, drop the gradients. Returns the gradient norm before clipping and the lr."""
        self.offload.prefetch()  # under model.optim_cpu_offload: the state uploads meanwhile
        grad_norm = clip_gradients(self.config.optim, self.model)
        lr = float(self.scheduler.get_last_lr()[0])
        self.offload.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return {"grad_norm": grad_norm, "lr": lr}

    def save(self, step: int, state: dict[str, Any]) -> Path:
        """Checkpoint step `step` with this rank's loop `state` (a collective)."""
        self.offload.wait()  # the optimizer state in host memory is whole
        return self.checkpointer.save(
            step,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            extra=state,
            export=self.export,
        )
