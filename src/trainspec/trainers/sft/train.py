"""The SFT training loop, top to bottom: build every component from its own sub-config, resume,
then step until max_steps, the end of the data, or an operator's stop.

    sft configs/sft/demo.toml                 # through the entrypoint (sft/main.py)
    python -c 'from trainspec.config import load; from trainspec.trainers.sft.train import train;
               train(load("sft", ["configs/sft/demo.toml"]).config)'
"""

from __future__ import annotations

import logging
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from ..bookkeeping import Bookkeeping, closing_line
from ..ckpt import Checkpointer, resolve_resume
from ..model import build_model
from ..optim import StateOffload, build_optimizer, clip_gradients
from ..parallel import activation_offload_context, apply_parallelism
from ..plot import save_plot
from ..progress import setup_logging
from ..run_files import write_resolved_config
from ..scheduler import build_scheduler
from ..tokenizer import build_tokenizer
from ..weights import hf_exporter
from ..world import World, all_reduce_sum, close_world, init_world
from .data import build_sft_data, build_val_batches, describe_sample
from .finish import task_report
from .setup import preflight

log = logging.getLogger("trainspec.sft")


def run_step(model, micro_batches, world: World, offload_cfg) -> tuple[float, int]:
    """Forward and backward over this rank's micro-batches; returns (loss, target tokens).

    The loss is normalised by the target tokens of the whole step on every rank, so gradient
    accumulation and any number of processes give the gradient of one large batch.
    """
    local_targets = sum(mb.num_targets for mb in micro_batches)
    targets = max(1.0, all_reduce_sum(float(local_targets), world))
    total = 0.0
    for index, mb in enumerate(micro_batches):
        if hasattr(model, "set_requires_gradient_sync"):  # FSDP: reduce once per step
            model.set_requires_gradient_sync(index == len(micro_batches) - 1)
        with activation_offload_context(offload_cfg, world.device):
            loss_sum = model(
                mb.input_ids.to(world.device),
                mb.position_ids.to(world.device),
                mb.labels.to(world.device),
            )
        (loss_sum * world.world_size / targets).backward()
        total += loss_sum.item()
    return all_reduce_sum(total, world) / targets, int(targets)


@torch.no_grad()
def validate(model, batches, world: World) -> float:
    model.eval()
    total, targets = 0.0, 0
    for mb in batches:
        total += model(
            mb.input_ids.to(world.device),
            mb.position_ids.to(world.device),
            mb.labels.to(world.device),
        ).item()
        targets += mb.num_targets
    model.train()
    return all_reduce_sum(total, world) / max(1.0, all_reduce_sum(float(targets), world))


def train(config) -> int:
    # -- world, logging, run directory ------------------------------------------------------
    world = init_world(config.dist_timeout_seconds)
    setup_logging(config.log, world.rank)
    if not sys.stderr.isatty():  # datasets' progress bars only help on a terminal
        import datasets

        datasets.disable_progress_bars()
    torch.set_float32_matmul_precision(config.matmul_precision)
    run_dir = Path(config.output_dir) / config.run.dir
    if config.clean and world.is_main and run_dir.exists():
        shutil.rmtree(run_dir)
    if world.is_main:
        document = write_resolved_config(config, run_dir, "sft")
    dist.barrier()

    # -- components, each from its own sub-config ---------------------------------------------
    preflight(config, world.world_size, world.device.type)
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    data = build_sft_data(config.data, tokenizer, rank=world.rank, world_size=world.world_size)
    val_batches = None
    if config.val is not None:
        val_batches = build_val_batches(
            config.val.data, tokenizer, rank=world.rank, world_size=world.world_size
        )
    model = build_model(config.model, world, seed=config.data.seed)
    model = apply_parallelism(model, config.model, world)
    optimizer = build_optimizer(config.optim, model, sharded=world.world_size > 1)
    scheduler = build_scheduler(config.scheduler, optimizer, max_steps=config.max_steps)
    optimizer_step = StateOffload(optimizer, config.model.optim_cpu_offload, world.device).step
    checkpointer = Checkpointer(config.ckpt, run_dir, world)
    export = hf_exporter(model.lm, tokenizer, config.model.lora)

    # -- resume ----------------------------------------------------------------------------
    step, tokens_seen = 0, 0
    resume_from = resolve_resume(config.resume, checkpointer)
    if resume_from is not None:
        extra = checkpointer.load(
            resume_from,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            ckpt_cfg=config.ckpt,
        )
        if "data" in extra:
            data.load_state_dict(extra["data"])
        progress_state = extra.get("progress", {})
        step, tokens_seen = progress_state.get("step", 0), progress_state.get("tokens", 0)
        log.info("resumed from %s at step %d", resume_from, step)

    def save(at_step: int) -> Path:
        state = {"data": data.state_dict(), "progress": {"step": at_step, "tokens": tokens_seen}}
        return checkpointer.save(
            at_step,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            extra=state,
            export=export,
        )

    # -- the loop --------------------------------------------------------------------------
    books = Bookkeeping.build(
        config, run_dir, config.run.name, document if world.is_main else {}, world, step
    )
    if val_batches is not None and config.val.eval_on_start and step == 0:
        books.monitor.log(0, {"val_loss": validate(model, val_batches, world)})
    books.start()
    last_saved: Path | None = None
    saved_step = -1
    stopped = False
    model.train()
    while config.max_steps is None or step < config.max_steps:
        if config.max_steps is None and data.epoch > 0:
            break  # one pass over the data when no max_steps is set
        started = time.perf_counter()
        micro_batches = data.next_step()
        if step == 0 and config.log.log_data and world.is_main:
            log.info("first sample:\n%s", describe_sample(micro_batches[0], tokenizer))
        loss, targets = run_step(model, micro_batches, world, config.model.ac_offloading)
        grad_norm = clip_gradients(config.optim, model)
        lr = scheduler.get_last_lr()[0]
        optimizer_step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        tokens = sum(mb.input_ids.numel() for mb in micro_batches) * world.world_size
        tokens_seen += tokens
        elapsed = time.perf_counter() - started
        metrics = {
            "loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "targets": targets,
            "tokens_per_s": tokens / elapsed,
            "step_time_s": elapsed,
            "epoch": data.epoch,
        }
        if val_batches is not None and step % config.val.interval == 0:
            metrics["val_loss"] = validate(model, val_batches, world)
        books.record(step, metrics)

        asked = books.commands(step)
        if books.should_save(step, checkpointer, asked):
            last_saved, saved_step = save(step), step
        if asked.stop:
            stopped = True
            books.progress.write(f"stop requested: stopping after step {step}")
            break

    # -- the end ---------------------------------------------------------------------------
    if config.ckpt is not None and saved_step != step and not stopped:
        last_saved = save(step)
    books.close()
    plot = save_plot(books.monitor.history, run_dir / "loss.png") if world.is_main else None
    if world.is_main:
        report = task_report(config, model, tokenizer, world)
        print(closing_line(run_dir, step, last_saved, plot, report), flush=True)
    close_world()
    return 0
