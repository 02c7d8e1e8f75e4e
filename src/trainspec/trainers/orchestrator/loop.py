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
import signal
import time
from contextlib import ExitStack
from pathlib import Path

import torch

from ..chat.prompts import prompt_renderer
from ..core.tokenizer import build_tokenizer
from ..core.world import World
from ..errors import SetupError
from ..process.liveness import LifeSign, orchestrator_sign
from ..run.console import setup_logging
from ..run.lock import lock_run_dir
from ..run.run_dir import write_resolved_config
from ..session import Session
from ..wire.batch import RolloutBatch, pack_samples
from ..wire.broadcast import check_broadcast
from ..wire.transport import build_sender
from .environments.players import Players
from .evals import run_evals
from .policy import Policy
from .refusals import check_support
from .rl_plot import draw_rl_plot
from .sampling.inflight import build_inflight
from .sources import eval_sources, train_sources
from .step_batch import StepBatch, build_picker

log = logging.getLogger("trainspec.orchestrator")


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


def run(config, *, progress: bool = True) -> int:
    """The orchestrator's run; `progress` off under `rl`, whose trainer's bar has the console."""
    # -- setup: every resource is closed on any exit, in the reverse order of its start --------
    setup_logging(config.log, 0)
    check_support(config)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    check_broadcast(config.weight_broadcast, device, sampler=config.sampler.type)
    run_dir = Path(config.output_dir)
    own_dir = run_dir / "orchestrator"
    with ExitStack() as stack:
        lock_run_dir(own_dir, "orchestrator", setting="output_dir")
        # a sign of life for the trainer, which may run on another node (process/liveness.py)
        life = stack.enter_context(LifeSign(orchestrator_sign(run_dir)))
        document = write_resolved_config(config, own_dir, "orchestrator")
        session = Session(
            config, own_dir, own_dir.name, document,
            world=World(rank=0, world_size=1, local_rank=0, device=torch.device(device)),
            start=None, progress=progress, stop_signals=(signal.SIGTERM, signal.SIGINT),
        )  # fmt: skip
        stack.callback(session.close)  # metrics, heartbeat, the signals, the directory's lock
        session.start()  # SIGTERM, Ctrl-C: finish the step, then stop
        tokenizer = build_tokenizer(config.tokenizer, config.model)
        render, stop_id = prompt_renderer(config.renderer, tokenizer)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_id
        inflight = build_inflight(config)  # episodes in flight: fixed, or following KV usage
        stack.callback(inflight.close)
        policy = Policy(config, run_dir, tokenizer, stop_id, inflight)
        stack.callback(policy.close)
        players = Players.of(config, tokenizer, inflight)  # plays the verifiers environments
        stack.callback(players.close)
        local = config.sampler.type == "local"
        sources = train_sources(
            config, tokenizer, render, local=local, stop_id=stop_id, players=players
        )
        for source in sources:
            stack.callback(source.learner.close)
        held_out = eval_sources(config, tokenizer, render, players=players)
        picker = build_picker(config, sources, own_dir)  # by batch_size, or token_batch_size
        sender = stack.enter_context(
            build_sender(config.rollout_transport, run_dir, config.num_train_workers)
        )
        say_progress_source(config.ckpt)
        lag = min(config.max_async_level, config.max_off_policy_steps)

        # -- start where the trainer is -------------------------------------------------------
        if not policy.wait_for(0, session.stop_pending, first=True):
            return 0
        step = policy.step  # a resumed trainer publishes its resume step first
        check_resume(config, step)
        picker.resume(step)  # token_batch_size: the prompts taken before, from picks.jsonl
        log.info("starting at step %d with the weights of step %d", step, policy.step)
        session.continue_from(step, resumed=True)  # the trainer's step, fresh or resumed
        if config.eval is not None:
            retrigger, skip = config.eval.retrigger_on_resume, config.eval.skip_first_step
            if retrigger if step > 0 else not skip:
                session.log(step, run_evals(
                    policy.sampler, held_out, step, config.seq_len, weights_step=policy.step,
                    every=True,
                ))  # fmt: skip

        # -- the loop ---------------------------------------------------------------------------
        first_step = step
        while config.max_steps is None or step < config.max_steps:
            waited = time.perf_counter()
            if not policy.wait_for(step - lag, session.stop_pending):
                break
            started = time.perf_counter()
            assert policy.sampler is not None  # wait_for returned True: weights are loaded
            batch = StepBatch()
            picker.start(step)  # one round, or rounds until the step holds token_batch_size
            while (picks := picker.next_round(batch, config)) is not None:
                batch.play(picks, sources, policy, config, step)
            picker.commit(step)  # token_batch_size: the picks written down
            if config.log.log_data and step == first_step and batch.first is not None:
                say_first_sample(batch, tokenizer)
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
            metrics = step_metrics(batch, mean_reward) | {
                "policy_step": policy.step,
                **inflight.metrics(),  # the adaptive cap and the KV-cache usage it follows
                "samples_per_s": len(batch.rewards) / (done - started),
                "sample_time_s": done - started,
                "wait_s": started - waited,
            }
            step += 1
            life.step = step
            if step != config.max_steps:  # the final step: evaluated below, final weights
                metrics |= run_evals(
                    policy.sampler, held_out, step, config.seq_len, weights_step=policy.step
                )
            if session.after_step(step, metrics):
                break

        # -- the end: the trainer's final weights, evaluated ------------------------------------
        life.step = step
        waited_out = not session.stop_pending() and policy.wait_for(step, session.stop_pending)
        life.finished = waited_out
        if waited_out and held_out:
            session.log(step, run_evals(
                policy.sampler, held_out, step, config.seq_len, weights_step=policy.step,
                every=True, final=True,
            ))  # fmt: skip
        session.close()
        draw_rl_plot(run_dir)
    return 0


def say_first_sample(batch: StepBatch, tokenizer) -> None:
    """`log.log_data`: the first sample of the run, as text."""
    assert batch.first is not None
    prompt, completion = batch.first
    log.info(
        "first sample:\nprompt: %r\ncompletion: %r\nanswer %r",
        tokenizer.decode(completion.prompt_of(prompt.ids)),
        completion.text,
        prompt.answer,
    )


def step_metrics(batch: StepBatch, mean_reward: float) -> dict:
    """What one step's samples say: rewards, lengths, truncation, distillation."""
    return {
        "reward": mean_reward,
        "reward_std": float(torch.tensor(batch.rewards).std()) if len(batch.rewards) > 1 else 0.0,
        "shipped_samples": len(batch.samples),
        "tokens": batch.tokens,  # prompt + completion tokens of every completion played
        "completion_len": sum(batch.lengths) / max(1, len(batch.lengths)),
        "truncated": batch.truncated / max(1, len(batch.rewards)),
        **({"teacher_kl": -sum(batch.distilled) / len(batch.distilled)} if batch.distilled else {}),
    }
