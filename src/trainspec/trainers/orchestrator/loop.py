"""The orchestrator loop, top to bottom: for every trainer step, take the newest weights the
async limit allows, pick the step's prompts from the train sources, sample a group of
completions of each (from the policy, or from a frozen model for sft), score them, let each
source's algorithm say what every completion teaches (advantages from rewards, or a teacher's
log-probabilities), pack and ship one share per trainer rank; evaluate the eval sources at
their intervals.

    orchestrator configs/orchestrator/demo.toml      # beside a running `rl-trainer`
    rl configs/rl/demo.toml                          # both, started together

The batch for step n is sampled with the weights of step n - max_async_level or newer (never
older than max_off_policy_steps), so with max_async_level = 1 sampling step n overlaps the
trainer's step n - 1. After the last batch the orchestrator waits for the trainer's final
weights and evaluates them.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import torch

from ..core.tokenizer import build_tokenizer
from ..errors import SetupError
from ..process.signals import SignalFlag
from ..rl.batch import RolloutBatch, pack_samples
from ..rl.broadcast import check_broadcast
from ..rl.transport import build_sender
from ..run.console import setup_logging
from ..run.heartbeat import Heartbeat
from ..run.lock import lock_run_dir, release_run_dir
from ..run.monitor import Monitor
from ..run.run_dir import write_resolved_config
from .evals import run_evals
from .inflight import build_inflight
from .policy import Policy
from .prompts import prompt_renderer
from .report import draw_rl_plot
from .sources import (
    Players,
    SourcePicker,
    TokenPicker,
    eval_sources,
    train_sources,
)
from .step_batch import StepBatch
from .support import check_support

log = logging.getLogger("trainspec.orchestrator")


# Set by `rl` for its orchestrator: the trainer's progress bar shares the terminal.
UNDER_RL = os.environ.get("TRAINSPEC_RL_SIDE") == "orchestrator"


def check_resume(config, step: int) -> None:
    """[resume] step is the step the trainer resumes from, so its first weights must be it."""
    if config.resume is None:
        return
    wanted, where = config.resume.step, config.resume.dir
    if wanted is not None and wanted != step:
        raise SetupError(
            "orchestrator.resume.step",
            f"= {wanted}, but the trainer's first weights are step {step}"
            + (f" (from {where})" if where else ""),
            "resume both from the same checkpoint (set resume.step once, at the top, under rl)",
        )


def say_progress_source(ckpt) -> None:
    """The orchestrator keeps no state a checkpoint would hold: it resumes at the trainer's step
    (prompt order and sampling seeds derive from the step), whatever [ckpt] asks."""
    if ckpt is not None and any(
        value is not None for value in (ckpt.interval, ckpt.keep_last, ckpt.keep_interval)
    ):
        log.info(
            "orchestrator: nothing to checkpoint (ckpt.interval %s, keep_last %s, keep_interval "
            "%s): it resumes at the step of the trainer's checkpoint",
            ckpt.interval,
            ckpt.keep_last,
            ckpt.keep_interval,
        )


def run(config) -> int:
    # -- setup ------------------------------------------------------------------------------
    setup_logging(config.log, 0)
    check_support(config)
    run_dir = Path(config.output_dir)
    own_dir = run_dir / "orchestrator"
    lock_run_dir(own_dir, "orchestrator", setting="output_dir")
    document = write_resolved_config(config, own_dir, "orchestrator")
    should_stop = SignalFlag((signal.SIGTERM, signal.SIGINT)).install()  # finish the step
    device = "cuda" if torch.cuda.is_available() else "cpu"
    check_broadcast(config.weight_broadcast, device)  # it loads weights from files only
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    render, stop_id = prompt_renderer(config.renderer, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_id
    local = config.sampler.type == "local"
    inflight = build_inflight(config)  # episodes in flight: fixed, or following the KV cache
    players = Players.of(config, tokenizer, inflight)  # plays the verifiers environments, if any
    try:
        sources = train_sources(
            config, tokenizer, render, local=local, stop_id=stop_id, players=players
        )
        held_out = eval_sources(config, tokenizer, render, players=players)
    except BaseException:  # refused: stop the environment servers already started
        players.close()
        inflight.close()
        raise
    if config.token_batch_size is None:
        picker: SourcePicker | TokenPicker = SourcePicker(
            sources, config.batch_size or 128, config.seed
        )
    else:
        picker = TokenPicker(sources, config.seed, own_dir / "picks.jsonl", config.token_batch_size)
    policy = Policy(config, run_dir, tokenizer, stop_id, inflight)
    sender = build_sender(config.rollout_transport, run_dir, config.num_train_workers)
    monitor = Monitor(config.monitors, own_dir, own_dir.name, document)
    heartbeat = Heartbeat(config.heartbeat)
    say_progress_source(config.ckpt)
    lag = min(config.max_async_level, config.max_off_policy_steps)

    # -- start where the trainer is ---------------------------------------------------------
    if not policy.wait_for(0, should_stop, first=True):
        return 0
    step = policy.step  # a resumed trainer publishes its resume step first
    check_resume(config, step)
    if isinstance(picker, TokenPicker):
        picker.resume(step)
    log.info("starting at step %d with the weights of step %d", step, policy.step)
    monitor.continue_from(step)
    if config.eval is not None:
        retrigger, skip = config.eval.retrigger_on_resume, config.eval.skip_first_step
        if retrigger if step > 0 else not skip:
            metrics = run_evals(
                policy.sampler, held_out, step, config.seq_len, weights_step=policy.step, every=True
            )
            monitor.log(step, metrics)

    # -- the loop --------------------------------------------------------------------------
    last_line = time.monotonic()
    first_step = step
    while config.max_steps is None or step < config.max_steps:
        waited = time.perf_counter()
        if not policy.wait_for(step - lag, should_stop):
            break
        started = time.perf_counter()
        assert policy.sampler is not None  # wait_for returned True: weights are loaded
        batch = StepBatch()
        if isinstance(picker, SourcePicker):
            batch.play(picker.step(step), sources, policy, config, step)
        else:  # groups until the step holds token_batch_size tokens; the picks are written down
            picker.start(step)
            while batch.tokens < picker.tokens:
                before = batch.tokens
                batch.play(picker.take(batch.prompts_for(config)), sources, policy, config, step)
                if batch.tokens == before:  # every episode of the round left out
                    raise SetupError(
                        "orchestrator.token_batch_size",
                        f"step {step}: a round of prompts gave no completions to count",
                        "see the failed episodes above",
                    )
            picker.commit(step)
        if config.log.log_data and step == first_step and batch.first is not None:
            prompt, completion = batch.first
            log.info(
                "first sample:\nprompt: %r\ncompletion: %r\nanswer %r",
                tokenizer.decode(completion.prompt_of(prompt.ids)),
                completion.text,
                prompt.answer,
            )
        shares = pack_samples(
            batch.samples,
            seq_len=config.seq_len,
            micro_batch_size=config.micro_batch_size,
            ranks=config.num_train_workers,
            pad_id=pad_id,
        )
        mean_reward = sum(batch.rewards) / max(1, len(batch.rewards))
        temperature = sources[0].sampling.temperature
        for rank, share in enumerate(shares):
            sender.send(
                step, rank, RolloutBatch(step, policy.step, temperature, share, mean_reward)
            )
        done = time.perf_counter()
        metrics = {
            "reward": mean_reward,
            "reward_std": float(torch.tensor(batch.rewards).std())
            if len(batch.rewards) > 1
            else 0.0,
            "shipped_samples": len(batch.samples),
            "tokens": batch.tokens,  # prompt + completion tokens of every completion played
            "completion_len": sum(batch.lengths) / max(1, len(batch.lengths)),
            "truncated": batch.truncated / max(1, len(batch.rewards)),
            **(
                {"teacher_kl": -sum(batch.distilled) / len(batch.distilled)}
                if batch.distilled
                else {}
            ),
            "policy_step": policy.step,
            **inflight.metrics(),  # the adaptive cap and the KV-cache usage it follows
            "samples_per_s": len(batch.rewards) / (done - started),
            "sample_time_s": done - started,
            "wait_s": started - waited,
        }
        step += 1
        final_step = step == config.max_steps  # evaluated below, with the final weights
        if not final_step:
            metrics.update(
                run_evals(policy.sampler, held_out, step, config.seq_len, weights_step=policy.step)
            )
        monitor.log(step, metrics)
        heartbeat.beat(step)
        due = time.monotonic() - last_line >= config.log.interval
        if (due and not UNDER_RL) or step == config.max_steps:  # under rl: the trainer's bar
            last_line = time.monotonic()
            log.info(
                "step %d | reward %.3f | policy %d | %.1f samples/s",
                step,
                mean_reward,
                policy.step,
                metrics["samples_per_s"],
            )
        if should_stop():
            break

    # -- the end: the trainer's final weights, evaluated ------------------------------------
    final = step if not should_stop() else None
    if final is not None and policy.wait_for(final, should_stop) and held_out:
        metrics = run_evals(
            policy.sampler, held_out, final, config.seq_len, weights_step=policy.step,
            every=True, final=True,
        )  # fmt: skip
        monitor.log(final, metrics)
    sender.close()
    for source in sources:
        source.learner.close()
    players.close()
    policy.close()
    inflight.close()
    monitor.close()
    heartbeat.close()
    draw_rl_plot(run_dir)
    should_stop.restore()
    release_run_dir(own_dir)
    return 0
