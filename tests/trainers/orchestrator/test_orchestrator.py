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
from helpers.orchestrator_runs import REVERSE_TEXT, small_run

from trainspec.config import load
from trainspec.trainers.core.tokenizer import build_tokenizer
from trainspec.trainers.orchestrator.environments.task import Task
from trainspec.trainers.orchestrator.loop import run
from trainspec.trainers.wire.batch import decode
from trainspec.trainers.wire.broadcast import READY, broadcast_dir
from trainspec.trainers.wire.transport_fs import rank_file

WAIT_S = 120.0


def tokenizer():
    return build_tokenizer(
        SimpleNamespace(name=None, trust_remote_code=None, chat_template=None),
        SimpleNamespace(name="builtin:tiny-qwen3", trust_remote_code=False),
    )


def task(split="train", reward="lcs_ratio", seed=0):
    return Task("builtin:reverse-text", tokenizer(), seed=seed, split=split, reward=reward)


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
            "group_size": 4,
            "seq_len": 64,
            "train.sampling.max_completion_tokens": 4,
            "rollout_transport.type": "filesystem",
            # a random model never answers exactly: every reward is 0
            "train.source": [
                {"env": {"taskset": {"id": "builtin:reverse-text", "reward": "exact_match"}}}
            ],
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
    held_out = {"interval": 1, "num_examples": 4, "sampling": {"max_completion_tokens": 4}}
    config = small_run(tmp_path, steps, eval={**held_out, "source": [REVERSE_TEXT]})
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
    assert said[0].startswith("step 0: builtin:reverse-text held-out exact match")
    assert "(4 prompts" in said[0]
    assert any(m.startswith("step 1: builtin:reverse-text held-out") for m in said)
    assert said[-1].startswith("step 2:") and "the final weights" in said[-1]
    assert (tmp_path / "rl.png").stat().st_size > 10_000


def test_two_sources_feed_one_batch_and_each_eval_source_is_logged(tmp_path, initial_weights):
    import json

    exact = {"env": {"taskset": {"id": "builtin:reverse-text", "reward": "exact_match"}}}
    sources = [{"name": "lcs", **REVERSE_TEXT}, {"name": "exact", "group_size": 4, **exact}]
    held_out = {
        "interval": 1,
        "num_examples": 2,
        "sampling": {"max_completion_tokens": 4},
        "source": [{"name": "a", **REVERSE_TEXT}, {"name": "b", "interval": 2, **REVERSE_TEXT}],
    }
    config = small_run(tmp_path, 2, **{"batch_size": 8, "train.source": sources, "eval": held_out})
    publish(tmp_path, 0, initial_weights)
    orchestrator = threading.Thread(target=run, args=(config,), daemon=True)
    orchestrator.start()
    for step in range(2):
        wait_for(rank_file(tmp_path, step, 0))
        publish(tmp_path, step + 1, initial_weights)
    orchestrator.join(WAIT_S)
    assert not orchestrator.is_alive()
    rows = [json.loads(line) for line in (tmp_path / "orchestrator" / "metrics.jsonl").open()]
    evals = {row["step"]: sorted(k for k in row if k.startswith("eval/")) for row in rows}
    both = ["eval/a/exact_match", "eval/a/reward", "eval/b/exact_match", "eval/b/reward"]
    assert evals[0] == both  # every source before the first step
    assert evals[2] == both  # and the final weights
    batch = decode(rank_file(tmp_path, 0, 0).read_bytes())
    assert batch.step == 0


@pytest.fixture
def signals_back():
    """run() takes SIGINT and SIGTERM for its stop flag; a run that raises leaves them set."""
    import signal

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_a_resume_step_the_trainer_did_not_publish_is_refused(
    tmp_path, initial_weights, signals_back
):
    from trainspec.trainers.errors import SetupError

    config = small_run(tmp_path, 1, resume={"step": 5})
    publish(tmp_path, 0, initial_weights)  # the trainer starts at 0, not 5
    with pytest.raises(SetupError) as caught:
        run(config)
    assert caught.value.path == "orchestrator.resume.step"
    assert "first weights are step 0" in caught.value.problem


def test_no_first_weights_in_time_is_an_error_naming_the_wait(tmp_path, signals_back):
    from trainspec.trainers.errors import SetupError

    config = small_run(tmp_path, 1, ckpt={"wait_for_weights_timeout": 1})
    with pytest.raises(SetupError) as caught:
        run(config)
    assert caught.value.path == "orchestrator.ckpt.wait_for_weights_timeout"
    assert "after 1 s" in caught.value.problem


def test_a_source_of_your_own_data_and_reward_runs(tmp_path, initial_weights, monkeypatch):
    """Rows from a JSONL file, scored by a reward in a local file; its eval logs the reward only
    (there is no reference answer to match)."""
    import json

    monkeypatch.chdir(tmp_path)
    rows = [{"prompt": f"say {word}", "word": word} for word in ("ab", "cd", "ef", "gh")]
    (tmp_path / "words.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "rewards.py").write_text(
        "def has_word(completion, word):\n    return float(word in completion)\n"
    )
    mine = {"data": {"name": "words.jsonl"}, "reward": ["rewards.py:has_word"]}
    held_out = {"interval": 1, "num_examples": 2, "sampling": {"max_completion_tokens": 4}}
    config = small_run(
        tmp_path / "run", 1, **{"train.source": [mine], "eval": {**held_out, "source": [mine]}}
    )
    run_dir = tmp_path / "run"
    publish(run_dir, 0, initial_weights)
    orchestrator = threading.Thread(target=run, args=(config,), daemon=True)
    orchestrator.start()
    wait_for(rank_file(run_dir, 0, 0))
    publish(run_dir, 1, initial_weights)
    orchestrator.join(WAIT_S)
    assert not orchestrator.is_alive()
    rows = [json.loads(line) for line in (run_dir / "orchestrator" / "metrics.jsonl").open()]
    assert {k for row in rows for k in row if k.startswith("eval/")} == {"eval/words.jsonl/reward"}
    assert all("eval_exact_match" not in row for row in rows)
    assert decode(rank_file(run_dir, 0, 0).read_bytes()).step == 0
    # its sign of life (process/liveness.py) says it ran to its end: `rl` reads it
    sign = json.loads((run_dir / "orchestrator" / "alive.json").read_text())
    assert sign["state"] == "ended" and sign["how"] == "finished" and sign["step"] == 1


def test_the_summary_gives_the_held_out_reward_where_there_is_no_exact_match(tmp_path):
    import json

    from trainspec.trainers.rl_run.summary import summarize

    trainer = [{"step": s, "reward": 0.1 * s} for s in (1, 2)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trainer))
    (tmp_path / "orchestrator").mkdir()
    evals = [{"step": 0, "eval_reward": 0.25}, {"step": 2, "eval_reward": 0.5}]
    (tmp_path / "orchestrator" / "metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in evals)
    )
    line = summarize(tmp_path)
    assert "held-out reward 0.250 -> 0.500" in line and "exact match" not in line
    assert line.startswith(f"rl: done after step 2: run {tmp_path}")
    assert summarize(tmp_path, seconds=754.2).startswith("rl: done after step 2 in 0:12:34: run")
