"""The orchestrator loop, top to bottom: for every trainer step, take the newest weights the
async limit allows, sample `rollouts_per_example` completions of each prompt, score them, turn
rewards into group-relative advantages, pack and ship one share per trainer rank.

    orchestrator configs/orchestrator/demo.toml      # beside a running `rl-trainer`
    rl configs/rl/demo.toml                          # both, started together

The batch for step n is sampled with the weights of step n - max_async_level or newer, so with
max_async_level = 1 sampling step n overlaps the trainer's step n - 1. After the last batch the
orchestrator waits for the trainer's final weights and evaluates them.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path

import torch

from ..core.tokenizer import build_tokenizer
from ..process.signals import SignalFlag
from ..rl.batch import RolloutBatch, Sample, pack_samples
from ..rl.broadcast import check_broadcast
from ..rl.transport import build_sender
from ..run.console import setup_logging
from ..run.lock import lock_run_dir, release_run_dir
from ..run.monitor import Monitor
from ..run.run_dir import write_resolved_config
from ..tasks import _stop_id
from .algorithms import grpo_advantages
from .policy import Policy
from .report import draw_rl_plot
from .task import Task

log = logging.getLogger("trainspec.orchestrator")


def score_groups(task: Task, prompts, groups) -> list[list[float]]:
    return [
        [task.reward(c.text, prompt.answer, c.finished) for c in group]
        for prompt, group in zip(prompts, groups, strict=True)
    ]


def evaluate(policy: Policy, task: Task, count: int, max_tokens: int) -> float:
    prompts = task.first(count)
    assert policy.sampler is not None, "evaluate after policy.wait_for has loaded weights"
    answers = policy.sampler.greedy([p.ids for p in prompts], max_tokens=max_tokens)
    hits = [
        a.finished and task.exact(a.text, p.answer) for p, a in zip(prompts, answers, strict=True)
    ]
    return sum(hits) / max(1, len(hits))


# Set by `rl` for its orchestrator: the trainer's progress bar shares the terminal.
UNDER_RL = os.environ.get("TRAINSPEC_RL_SIDE") == "orchestrator"


def said_eval(step: int, policy: int, score: float, count: int, final_weights=False) -> None:
    which = "the final weights" if final_weights else f"the weights of step {policy}"
    log.info(
        "step %d: held-out exact match %.1f%% (%d prompts, %s)", step, 100 * score, count, which
    )


def run(config) -> int:
    # -- setup ------------------------------------------------------------------------------
    setup_logging(config.log, 0)
    run_dir = Path(config.output_dir)
    own_dir = run_dir / "orchestrator"
    lock_run_dir(own_dir, "orchestrator", setting="output_dir")
    document = write_resolved_config(config, own_dir, "orchestrator")
    should_stop = SignalFlag((signal.SIGTERM, signal.SIGINT)).install()  # finish the step
    device = "cuda" if torch.cuda.is_available() else "cpu"
    check_broadcast(config.weight_broadcast, device)  # it loads weights from files only
    tokenizer = build_tokenizer(config.tokenizer, config.model)
    stop_id = _stop_id(tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_id
    task = Task(config.task, tokenizer, seed=config.seed)
    held_out = (
        Task(config.task, tokenizer, seed=config.seed, split=config.eval.split)
        if (config.eval is not None)
        else None
    )
    policy = Policy(config, run_dir, tokenizer, stop_id)
    sender = build_sender(config.rollout_transport, run_dir, config.trainer_ranks)
    monitor = Monitor(config.monitors, own_dir, own_dir.name, document)
    prompts_per_step = config.batch_size // config.rollouts_per_example

    # -- start where the trainer is ---------------------------------------------------------
    if not policy.wait_for(0, should_stop):
        return 0
    step = policy.step  # a resumed trainer publishes its resume step first
    log.info("starting at step %d with the weights of step %d", step, policy.step)
    monitor.continue_from(step)
    if held_out is not None and not monitor.has(step, "eval_exact_match"):
        score = evaluate(policy, held_out, config.eval.num_examples, config.sampling.max_tokens)
        monitor.log(step, {"eval_exact_match": score})
        said_eval(step, policy.step, score, config.eval.num_examples)

    # -- the loop --------------------------------------------------------------------------
    last_line = time.monotonic()
    first_step = step
    while config.max_steps is None or step < config.max_steps:
        waited = time.perf_counter()
        if not policy.wait_for(step - config.max_async_level, should_stop):
            break
        started = time.perf_counter()
        prompts = task.prompts(step, prompts_per_step)
        assert policy.sampler is not None  # wait_for returned True: weights are loaded
        groups = policy.sampler.sample(
            [p.ids for p in prompts],
            config.rollouts_per_example,
            temperature=config.sampling.temperature,
            max_tokens=config.sampling.max_tokens,
            seed=config.seed * 1_000_003 + step,
        )
        rewards = score_groups(task, prompts, groups)
        if config.log.log_data and step == first_step:
            log.info(
                "first sample:\nprompt: %r\ncompletion: %r\nreward %.3f (answer %r)",
                tokenizer.decode(prompts[0].ids),
                groups[0][0].text,
                rewards[0][0],
                prompts[0].answer,
            )
        advantages = [grpo_advantages(group_rewards) for group_rewards in rewards]
        samples = [
            Sample(prompt.ids, c.token_ids, c.logprobs, advantage, reward)
            for prompt, group, group_rewards, group_advs in zip(
                prompts, groups, rewards, advantages, strict=True
            )
            for c, reward, advantage in zip(group, group_rewards, group_advs, strict=True)
            if advantage != 0.0  # a sample no better or worse than its group teaches nothing
        ]
        shares = pack_samples(
            samples,
            seq_len=config.seq_len,
            micro_batch_size=config.micro_batch_size,
            ranks=config.trainer_ranks,
            pad_id=pad_id,
        )
        flat = [r for group in rewards for r in group]
        mean_reward = sum(flat) / len(flat)
        for rank, share in enumerate(shares):
            sender.send(
                step,
                rank,
                RolloutBatch(step, policy.step, config.sampling.temperature, share, mean_reward),
            )
        done = time.perf_counter()
        lengths = [len(c.token_ids) for group in groups for c in group]
        metrics = {
            "reward": mean_reward,
            "reward_std": float(torch.tensor(flat).std()) if len(flat) > 1 else 0.0,
            "shipped_samples": len(samples),
            "completion_len": sum(lengths) / len(lengths),
            "truncated": sum(not c.finished for g in groups for c in g) / len(flat),
            "policy_step": policy.step,
            "samples_per_s": len(flat) / (done - started),
            "sample_time_s": done - started,
            "wait_s": started - waited,
        }
        step += 1
        final_step = step == config.max_steps  # evaluated below, with the final weights
        if held_out is not None and step % config.eval.interval == 0 and not final_step:
            metrics["eval_exact_match"] = evaluate(
                policy, held_out, config.eval.num_examples, config.sampling.max_tokens
            )
            said_eval(step, policy.step, metrics["eval_exact_match"], config.eval.num_examples)
        monitor.log(step, metrics)
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
    if final is not None and policy.wait_for(final, should_stop) and held_out is not None:
        score = evaluate(policy, held_out, config.eval.num_examples, config.sampling.max_tokens)
        monitor.log(final, {"eval_exact_match": score})
        said_eval(final, final, score, config.eval.num_examples, final_weights=True)
    sender.close()
    policy.close()
    monitor.close()
    draw_rl_plot(run_dir)
    should_stop.restore()
    release_run_dir(own_dir)
    return 0
