"""The SFT training loop, top to bottom: the parts from their sub-configs, the data, resume, then
step until max_steps, the end of the data, or an operator's stop.

    sft configs/sft/demo.toml                 # through the entrypoint (sft/main.py)
    python -c 'from trainspec.config import load; from trainspec.trainers.sft.train import train;
               train(load("sft", ["configs/sft/demo.toml"]).config)'
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from ..ckpt.checkpointer import DATA_KEY, PROGRESS_KEY
from ..core.lm import summed_loss
from ..core.world import World, all_reduce_sum, close_world, init_world
from ..errors import RunError
from ..parts import Parts
from ..session import Session, start_run
from .data import MicroBatch, build_sft_data, build_val_batches, describe_sample
from .held_out import held_out_report
from .online_evals import OnlineEvals
from .refusals import check_sft

log = logging.getLogger("trainspec.sft")


def run_step(parts: Parts, micro_batches: list[MicroBatch]) -> tuple[float, int]:
    """Forward and backward over this rank's micro-batches; returns (loss, target tokens).

    The loss is normalised by the target tokens of the whole step on every rank, so gradient
    accumulation and any number of processes give the gradient of one large batch.
    """
    world = parts.world
    targets = all_reduce_sum(float(sum(mb.num_targets for mb in micro_batches)), world)
    if targets == 0:  # rows without a target are left out when the data is built
        raise RunError("data", "a step holds no token to train on", "check the data's loss mask")
    # Summed on the device, read once a step: a GPU never waits for the host mid-step.
    total = torch.zeros((), dtype=torch.float64, device=world.device)
    for mb in parts.accumulate(micro_batches):
        mb = mb.to(world.device)
        with parts.offloaded_activations():
            loss_sum = summed_loss(parts.model, mb.input_ids, mb.position_ids, mb.labels)
        (loss_sum * world.world_size / targets).backward()
        total += loss_sum.detach().double()
    return all_reduce_sum(total.item(), world) / targets, int(targets)


@torch.no_grad()
def validate(model, batches: list[MicroBatch], world: World) -> float:
    model.eval()
    total, targets = 0.0, 0
    for mb in batches:
        mb = mb.to(world.device)
        total += summed_loss(model, mb.input_ids, mb.position_ids, mb.labels).item()
        targets += mb.num_targets
    model.train()
    return all_reduce_sum(total, world) / max(1.0, all_reduce_sum(float(targets), world))


def reached(val_cfg, metrics: dict, step: int) -> bool:
    """Whether this step's validation loss is the state `val.stop_at_loss` ends the run on
    (the same answer on every rank: the loss is reduced over all of them)."""
    target = val_cfg.stop_at_loss if val_cfg is not None else None
    loss = metrics.get("val_loss")
    if target is None or loss is None or loss > target:
        return False
    log.info("val loss %.4f <= val.stop_at_loss = %g at step %d: the run ends", loss, target, step)
    return True


def resumed_validation(val_cfg, parts: Parts, val: list[MicroBatch] | None) -> dict:
    """The validation loss of the weights a run resumes from, when the run ends on a loss
    (val.stop_at_loss): the same weights give the same loss, so a run that ended on it is
    done. {} otherwise (no validation pass spent)."""
    if val is None or val_cfg.stop_at_loss is None:
        return {}
    return {"val_loss": validate(parts.model, val, parts.world)}


def train(config) -> int:
    world = init_world(config.dist_timeout_seconds)
    run_dir = Path(config.output_dir) / config.run.dir
    document = start_run(config, "sft", run_dir, world, setting="run.name", clean=config.clean)
    check_sft(config, world.world_size, world.device.type)
    parts = Parts.build(config, "sft", world, run_dir, seed=config.data.seed)
    rank, world_size = world.rank, world.world_size
    shards = {"rank": rank, "world_size": world_size, "renderer": config.renderer}
    data = build_sft_data(config.data, parts.tokenizer, **shards)
    val = None
    if config.val is not None:
        val = build_val_batches(config.val.data, parts.tokenizer, **shards)

    step, state = parts.resume(config.resume)
    evals = OnlineEvals.build(config, parts, run_dir, world)  # None without [eval]
    if DATA_KEY in state:
        data.load_state_dict(state[DATA_KEY])
    tokens_seen = state.get(PROGRESS_KEY, {}).get("tokens", 0)

    def save(at_step: int) -> Path:
        progress = {"step": at_step, "tokens": tokens_seen}
        return parts.save(at_step, {DATA_KEY: data.state_dict(), PROGRESS_KEY: progress})

    session = Session(
        config, run_dir, config.run.name, document, world=world, save=save,
        start=parts.start_step, resumed_from=parts.resumed_from,
    )  # fmt: skip
    if val is not None and config.val.eval_on_start and step == 0:
        session.log(0, {"val_loss": validate(parts.model, val, world)})
    # a resumed run whose checkpoint met val.stop_at_loss ended there: it trains no further
    ended = step > 0 and reached(config.val, resumed_validation(config.val, parts, val), step)
    if evals is not None and (scores := evals.at_start(step)):
        session.log(step, scores)
    steps = "" if config.max_steps is not None else "one pass over the data (no max_steps)"
    session.announce("sft", config.model.name, parts.model, data.describe(), steps)
    session.start()
    parts.model.train()
    while not ended and (config.max_steps is None or step < config.max_steps):
        if config.max_steps is None and data.epoch > 0:
            break  # one pass over the data when no max_steps is set
        started = time.perf_counter()
        micro_batches = data.next_step()
        if step == 0 and config.log.log_data and world.is_main:
            log.info("first sample:\n%s", describe_sample(micro_batches[0], parts.tokenizer))
        loss, targets = run_step(parts, micro_batches)
        metrics = {"loss": loss, **parts.update(), "targets": targets}
        if step == parts.start_step:  # once per start: the rows longer than data.seq_len
            metrics |= data.report
        step += 1
        tokens = sum(mb.input_ids.numel() for mb in micro_batches) * world.world_size
        tokens_seen += tokens
        elapsed = time.perf_counter() - started
        metrics |= {"tokens_per_s": tokens / elapsed, "step_time_s": elapsed, "epoch": data.epoch}
        if val is not None and step % config.val.interval == 0:
            metrics["val_loss"] = validate(parts.model, val, world)
        if evals is not None:
            metrics |= evals.after_step(step, final=step == config.max_steps)
        if session.after_step(step, metrics) or reached(config.val, metrics, step):
            break

    if evals is not None:
        if scores := evals.at_end(step, stopped=session.stopped):
            session.log(step, scores)
        evals.close()

    def report() -> str | None:
        parts_of = [held_out_report(config, parts.model, parts.tokenizer, world)]
        parts_of.append(evals.summary() if evals is not None else None)
        return "; ".join(p for p in parts_of if p) or None

    session.end(step, report=report)
    close_world()
    return 0
