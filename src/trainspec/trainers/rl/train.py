"""The RL training loop, top to bottom: build every component from its own sub-config, resume,
then for each step take this rank's rollouts, train on the policy loss, publish the new weights,
until max_steps or an operator's stop.

    rl-trainer configs/rl/tiny.toml          # through the entrypoint (rl/main.py)
"""

from __future__ import annotations

import logging
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
from ..world import World, all_reduce_sum, any_rank, close_world, init_world
from .batch import RolloutBatch
from .broadcast import build_broadcast
from .data import build_rollout_source
from .loss import LossInputs, build_loss
from .setup import preflight
from .token_export import TokenExport, describe_first_sample

log = logging.getLogger("trainspec.rl")


def run_step(model, batch: RolloutBatch, loss_fn, world: World, offload_cfg) -> dict[str, float]:
    """Forward and backward over this rank's micro-batches.

    Every micro-batch's loss is a sum over its tokens, divided by the loss tokens of the whole
    step on every rank: any split into micro-batches and processes gives the same gradient.
    """
    loss_tokens = max(1.0, all_reduce_sum(float(batch.num_loss_tokens), world))
    totals: dict[str, float] = {"loss": 0.0}
    for index, mb in enumerate(batch.micro_batches):
        if hasattr(model, "set_requires_gradient_sync"):  # FSDP: reduce once per step
            model.set_requires_gradient_sync(index == len(batch.micro_batches) - 1)
        mb = mb.to(world.device)
        with activation_offload_context(offload_cfg, world.device):
            logprobs = model(mb.input_ids, mb.position_ids, mb.targets, batch.temperature)
        out = loss_fn(
            LossInputs(
                trainer_logprobs=logprobs,
                inference_logprobs=mb.inference_logprobs.reshape(-1),
                advantages=mb.advantages.reshape(-1),
                loss_mask=mb.loss_mask.reshape(-1),
            )
        )
        (out.loss * world.world_size / loss_tokens).backward()
        share = mb.num_loss_tokens
        totals["loss"] += out.loss.item()
        for key, value in out.metrics.items():  # token-weighted means over the step
            totals[key] = totals.get(key, 0.0) + float(value) * share
    return {
        key: all_reduce_sum(value, world) / loss_tokens for key, value in sorted(totals.items())
    } | {"loss_tokens": loss_tokens}


def train(config) -> int:
    # -- world, logging, run directory ------------------------------------------------------
    world = init_world(config.dist_timeout_seconds)
    setup_logging(config.log, world.rank)
    torch.set_float32_matmul_precision(config.matmul_precision)
    run_dir = Path(config.output_dir)
    if world.is_main:
        document = write_resolved_config(config, run_dir, "rl")
    dist.barrier()

    # -- components, each from its own sub-config ---------------------------------------------
    preflight(config, world.world_size, world.device.type)
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    model = build_model(config.model, world, seed=0)
    model = apply_parallelism(model, config.model, world)
    loss_fn = build_loss(config.loss)
    optimizer = build_optimizer(config.optim, model, sharded=world.world_size > 1)
    scheduler = build_scheduler(config.scheduler, optimizer, max_steps=config.max_steps)
    optimizer_step = StateOffload(optimizer, config.model.optim_cpu_offload, world.device).step
    checkpointer = Checkpointer(config.ckpt, run_dir, world)
    export = hf_exporter(model.lm, tokenizer, config.model.lora)
    broadcast = build_broadcast(config.weight_broadcast, run_dir, model, export, world)
    source = build_rollout_source(
        config,
        run_dir,
        world,
        vocab_size=model.lm.config.vocab_size,
        pad_id=tokenizer.pad_token_id or 0,
    )
    tokens_out = TokenExport(run_dir, enabled=config.enable_token_export, rank=world.rank)

    # -- resume ----------------------------------------------------------------------------
    step = 0
    resume_from = resolve_resume(config.resume, checkpointer)
    if resume_from is not None:
        extra = checkpointer.load(
            resume_from,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            ckpt_cfg=config.ckpt,
        )
        step = extra.get("progress", {}).get("step", 0)
        log.info("resumed from %s at step %d", resume_from, step)
    broadcast.publish(step)  # the orchestrator starts sampling from exactly these weights

    def save(at_step: int) -> Path:
        path = checkpointer.save(
            at_step,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            extra={"progress": {"step": at_step}},
            export=export,
        )
        source.commit(at_step)  # rollouts before this step are no longer needed
        return path

    # -- the loop --------------------------------------------------------------------------
    books = Bookkeeping.build(
        config, run_dir, run_dir.name, document if world.is_main else {}, world, step
    )
    books.start()
    start_step = step
    last_saved: Path | None = None
    saved_step = -1
    stopped = False
    model.train()
    while config.max_steps is None or step < config.max_steps:
        waited = time.perf_counter()
        batch = source.next(step, books.control.stop_pending)
        if any_rank(batch is None, world):
            stopped = True  # asked to stop while waiting for rollouts: nothing half done
            books.commands(step)
            books.progress.write(f"stop requested: stopping before step {step + 1}")
            on_stop = books.control.checkpoint_on_stop
            if config.ckpt is not None and on_stop and saved_step != step:
                last_saved, saved_step = save(step), step
            break
        started = time.perf_counter()
        if config.log.log_data and world.is_main and step == start_step:
            log.info("first sample:\n%s", describe_first_sample(batch, tokenizer))
        tokens_out.write(step, batch, tokenizer)
        metrics = run_step(model, batch, loss_fn, world, config.model.ac_offloading)
        metrics["grad_norm"] = clip_gradients(config.optim, model)
        metrics["lr"] = float(scheduler.get_last_lr()[0])  # our optimizers' lr is a float
        optimizer_step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        broadcast.publish(step)
        if config.ckpt is None:
            source.commit(step)
        done = time.perf_counter()
        tokens = sum(mb.input_ids.numel() for mb in batch.micro_batches) * world.world_size
        if config.data.fake is None:
            metrics["reward"] = batch.reward
        metrics |= {
            "off_policy_steps": step - 1 - batch.policy_step,
            "tokens_per_s": tokens / (done - started),
            "step_time_s": done - started,
            "wait_s": started - waited,
        }
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
    source.close()
    books.close()
    plot = save_plot(books.monitor.history, run_dir / "loss.png") if world.is_main else None
    if world.is_main:
        print(closing_line(run_dir, step, last_saved, plot), flush=True)
    close_world()
    return 0
