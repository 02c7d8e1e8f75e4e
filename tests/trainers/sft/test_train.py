"""The SFT loop on a tiny model, in process: it learns, every optimizer and schedule runs,
gradient accumulation is exact, and a resumed run continues exactly where it stopped."""

from __future__ import annotations

import json
import math

import pytest
import torch
from helpers.sft_support import losses, metrics, run_dir, tiny_config
from safetensors.torch import load_file

from trainspec.config import load
from trainspec.trainers.sft.train import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_loss_falls_on_learnable_data(tmp_path):
    config = tiny_config(tmp_path, max_steps=30, data__input_ids="increasing")
    assert train(config) == 0
    seen = losses(config)
    assert seen[30] < seen[1] / 3, seen


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "muon", "sign_sgd"])
@pytest.mark.parametrize("schedule", ["constant", "linear", "cosine"])
def test_every_optimizer_and_schedule_trains(tmp_path, optimizer, schedule):
    overrides = {"optim.type": optimizer, "scheduler.type": schedule, "max_steps": 6}
    if schedule != "constant":
        overrides |= {"scheduler.warmup_steps": 2, "scheduler.min_lr": 1e-4}
    if schedule == "linear":
        overrides["scheduler.decay_steps"] = 2
    config = tiny_config(tmp_path, **{k.replace(".", "__"): v for k, v in overrides.items()})
    assert train(config) == 0
    rows = [m for m in metrics(config) if "loss" in m]
    assert [m["step"] for m in rows] == [1, 2, 3, 4, 5, 6]
    assert all(math.isfinite(m["loss"]) for m in rows)
    lrs = [m["lr"] for m in rows]
    if schedule == "constant":
        assert lrs == [3e-3] * 6
    else:
        assert lrs[0] == pytest.approx(1.5e-3)  # warmup: half of lr at the first step
        assert lrs[1] == pytest.approx(3e-3)
        assert lrs[-1] < lrs[1]  # decaying towards min_lr


def _final_weights(config) -> dict[str, torch.Tensor]:
    ckpt = run_dir(config) / "checkpoints" / f"step_{config.max_steps}" / "weights"
    return load_file(ckpt / "model.safetensors")


def test_gradient_accumulation_equals_one_large_batch(tmp_path):
    common = {"max_steps": 2, "ckpt": {}, "data__length": "variable"}
    whole = tiny_config(tmp_path / "whole", data__micro_batch_size=4, **common)
    accumulated = tiny_config(tmp_path / "acc", data__micro_batch_size=1, **common)
    assert train(whole) == 0 and train(accumulated) == 0
    assert losses(whole) == pytest.approx(losses(accumulated), rel=1e-5)
    a, b = _final_weights(whole), _final_weights(accumulated)
    assert a.keys() == b.keys()
    for name in a:
        # Adam divides by the gradient's scale: float rounding shows at ~1e-5 of an lr-sized step
        torch.testing.assert_close(a[name], b[name], rtol=1e-4, atol=2e-5, msg=name)


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    data = tmp_path / "chats.jsonl"
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    rows = [
        {"messages": [{"role": "user", "content": w}, {"role": "assistant", "content": w[::-1]}]}
        for w in words
    ]
    data.write_text("\n".join(json.dumps(row) for row in rows))
    chat = {"data__type": "sft", "data__name": str(data), "data__shuffle": True}
    full = tiny_config(tmp_path / "full", max_steps=6, ckpt={}, **chat)
    assert train(full) == 0
    first = tiny_config(tmp_path / "split", max_steps=3, ckpt={}, **chat)
    assert train(first) == 0
    second = tiny_config(tmp_path / "split", max_steps=6, ckpt={}, resume={}, **chat)
    assert train(second) == 0
    assert losses(second) == losses(full)  # exactly: same data rows, RNG, optimizer state


def test_resolved_config_is_written_and_reads_back(tmp_path):
    config = tiny_config(tmp_path, max_steps=1)
    assert train(config) == 0
    directory = run_dir(config)
    from_json = load("sft", [], json.loads((directory / "config.json").read_text()))
    from_toml = load("sft", [directory / "config.toml"])
    assert from_json.config == config
    assert from_toml.config == config


def test_a_run_ends_on_the_validation_loss_it_was_to_reach(tmp_path):
    """val.stop_at_loss: the first validation at or below it ends the run with a checkpoint."""
    rows = tmp_path / "val.jsonl"
    chat = {"messages": [{"role": "user", "content": "ab"}, {"role": "assistant", "content": "ba"}]}
    rows.write_text((json.dumps(chat) + "\n") * 4)
    data = {"name": str(rows), "batch_size": 4, "seq_len": 32}
    VAL = {"interval": 3, "data": data}  # noqa: N806 (a table, as in a config)
    low = tiny_config(tmp_path / "never", max_steps=9, val={**VAL, "stop_at_loss": 1e-6})
    assert train(low) == 0
    assert max(m["step"] for m in metrics(low)) == 9  # never reached: max_steps is the cap
    reach = tiny_config(
        tmp_path / "reach", max_steps=9, val={**VAL, "stop_at_loss": 1e3}, ckpt={"interval": 50}
    )
    assert train(reach) == 0
    assert [m["step"] for m in metrics(reach) if "loss" in m] == [1, 2, 3]
    checkpoints = run_dir(reach) / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["latest", "step_3"]
    assert (checkpoints / "latest").resolve() == (checkpoints / "step_3").resolve()
    assert (checkpoints / "latest" / "weights" / "model.safetensors").is_file()
    # the same command again: the checkpoint it resumes from met the target, so it is done
    # (it once trained on from there, moving whatever started from it)
    assert train(reach) == 0
    assert [m["step"] for m in metrics(reach) if "loss" in m] == [1, 2, 3]
    assert sorted(p.name for p in checkpoints.iterdir()) == ["latest", "step_3"]
