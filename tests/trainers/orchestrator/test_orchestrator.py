"""The orchestrator: group-relative advantages, the task's prompts and reward, and the async limit
(the batch for step n is never sampled with weights older than step n - max_async_level), run
against a stand-in trainer that publishes weights only when the test says so."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from trainspec.config import load
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.orchestrator.loop import run
from trainspec.trainers.orchestrator.task import Task
from trainspec.trainers.rl.batch import decode
from trainspec.trainers.rl.broadcast import READY, broadcast_dir
from trainspec.trainers.rl.transport_fs import rank_file

WAIT_S = 120.0


def task(split="train", reward="lcs_ratio", seed=0):
    cfg = SimpleNamespace(name="builtin:reverse-text", reward=reward, split="train")
    tokenizer = build_tokenizer(
        SimpleNamespace(name=None, trust_remote_code=None, chat_template=None),
        SimpleNamespace(name="builtin:tiny-qwen3", trust_remote_code=False),
    )
    return Task(cfg, tokenizer, seed=seed, split=split)


def test_prompts_follow_the_seed_and_rewards_score_the_answer():
    first, again, other = task(seed=1), task(seed=1), task(seed=2)
    assert [p.answer for p in first.prompts(3, 5)] == [p.answer for p in again.prompts(3, 5)]
    assert [p.answer for p in first.prompts(3, 5)] != [p.answer for p in other.prompts(3, 5)]
    assert first.reward("cba", "cba", finished=True) == 1.0
    assert first.reward("cba", "cba", finished=False) == 0.0  # cut off by max_tokens
    assert first.reward("c", "cba", finished=True) == pytest.approx(1 / 3)  # a fragment: low
    exact = task(reward="exact_match")
    assert exact.reward(" cba\n", "cba", finished=True) == 1.0
    assert exact.reward("cb", "cba", finished=True) == 0.0


@pytest.fixture(scope="module")
def initial_weights(tmp_path_factory) -> Path:
    """A one-layer built-in model in Hugging Face format: what the trainer publishes first."""
    from trainspec.trainers.core.model import load_hf_model

    model_cfg = load("rl", [], {"model.name": "builtin:tiny-qwen3", "model.debug.num_layers": 1})
    lm = load_hf_model(model_cfg.config.model, seed=0)
    path = tmp_path_factory.mktemp("weights")
    lm.save_pretrained(path)
    return path


def publish(run_dir: Path, step: int, source: Path) -> None:
    target = broadcast_dir(run_dir, step)
    shutil.copytree(source, target)
    (target / READY).touch()


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.02)


def small_run(run_dir: Path, steps: int, **settings):
    """An orchestrator config of `steps` small steps (4 prompts x 2, 4 new tokens) in `run_dir`."""
    small = {"batch_size": 4, "rollouts_per_example": 2, "seq_len": 64, "sampling.max_tokens": 4}
    files = {"rollout_transport.type": "filesystem"}
    return load(
        "orchestrator",
        [],
        {"output_dir": str(run_dir), "max_steps": steps, **small, **files, **settings},
    ).config


@pytest.mark.parametrize("async_level", [0, 1, 2])
def test_no_batch_is_sampled_with_weights_older_than_the_async_limit(
    tmp_path, initial_weights, async_level
):
    steps = 5
    settings = {"max_async_level": async_level, "weight_broadcast.type": "filesystem"}
    config = small_run(tmp_path, steps, **settings)
    publish(tmp_path, 0, initial_weights)
    orchestrator = threading.Thread(target=run, args=(config,), daemon=True)
    orchestrator.start()
    policies = []
    for step in range(steps):  # the stand-in trainer
        wait_for(rank_file(tmp_path, step, 0))
        batch = decode(rank_file(tmp_path, step, 0).read_bytes())
        assert batch.step == step
        policies.append(batch.policy_step)
        time.sleep(0.3)  # let an orchestrator that ignored the limit run ahead
        ahead = step + async_level + 1  # needs the weights of step + 1, not published yet
        assert not rank_file(tmp_path, ahead, 0).exists(), f"step {ahead} shipped too early"
        publish(tmp_path, step + 1, initial_weights)
    orchestrator.join(WAIT_S)
    assert not orchestrator.is_alive()
    assert all(step - policy <= async_level for step, policy in enumerate(policies)), policies
    if async_level == 0:
        assert policies == list(range(steps))  # fully on-policy


def test_samples_with_zero_advantage_are_not_shipped(tmp_path, initial_weights):
    config = load(
        "orchestrator",
        [],
        {
            "output_dir": str(tmp_path),
            "max_steps": 1,
            "batch_size": 8,
            "rollouts_per_example": 4,
            "seq_len": 64,
            "sampling.max_tokens": 4,
            "rollout_transport.type": "filesystem",
            "task.reward": "exact_match",  # a random model never answers exactly: all zero
        },
    ).config
    publish(tmp_path, 0, initial_weights)
    orchestrator = threading.Thread(target=run, args=(config,), daemon=True)
    orchestrator.start()
    wait_for(rank_file(tmp_path, 0, 0))
    publish(tmp_path, 1, initial_weights)  # the trainer's final weights end the run
    orchestrator.join(WAIT_S)
    assert not orchestrator.is_alive()
    batch = decode(rank_file(tmp_path, 0, 0).read_bytes())
    assert batch.num_loss_tokens == 0
    assert batch.reward == 0.0
    assert torch.equal(
        batch.micro_batches[0].loss_mask, torch.zeros_like(batch.micro_batches[0].loss_mask)
    )


def test_evals_are_said_when_they_happen_and_the_run_leaves_rl_png(
    tmp_path, initial_weights, caplog
):
    """An orchestrator run on its own (as beside `rl-trainer`): each held-out evaluation is a
    log line as it happens, and the end draws rl.png from the metrics of both sides."""
    steps = 2
    config = small_run(tmp_path, steps, eval={"interval": 1, "num_examples": 4})
    trainer_metrics = "".join(f'{{"step": {s}, "reward": 0.1, "loss": 0.0}}\n' for s in (1, 2))
    (tmp_path / "metrics.jsonl").write_text(trainer_metrics)  # what rl-trainer logs meanwhile
    publish(tmp_path, 0, initial_weights)
    with caplog.at_level("INFO", logger="trainspec"):
        orchestrator = threading.Thread(target=run, args=(config,), daemon=True)
        orchestrator.start()
        for step in range(steps):  # the stand-in trainer
            wait_for(rank_file(tmp_path, step, 0))
            publish(tmp_path, step + 1, initial_weights)
        orchestrator.join(WAIT_S)
    assert not orchestrator.is_alive()
    said = [r.getMessage() for r in caplog.records if "held-out exact match" in r.getMessage()]
    assert said[0].startswith("step 0: held-out exact match") and "(4 prompts" in said[0]
    assert any(m.startswith("step 1: held-out exact match") for m in said)
    assert said[-1].startswith("step 2:") and "the final weights" in said[-1]
    assert (tmp_path / "rl.png").stat().st_size > 10_000
