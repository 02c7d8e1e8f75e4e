"""The learning-rate schedule at its endpoints: the first and last warmup steps, the first decay
step and the last step, for each schedule type."""

from __future__ import annotations

import pytest
import torch

from trainspec.config import load
from trainspec.trainers.core.scheduler import build_scheduler, lr_factor

LR = 1e-3


def scheduler_cfg(**settings):
    overrides = {f"scheduler.{key}": value for key, value in settings.items()}
    return load("sft", [], {"max_steps": 100, "optim.lr": LR, **overrides}).config.scheduler


def test_constant_is_one_everywhere():
    cfg = scheduler_cfg(type="constant")
    assert [lr_factor(cfg, step, 100, LR) for step in (0, 50, 99)] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_warmup_starts_at_one_step_and_ends_at_the_peak(kind):
    extra = {"decay_steps": 10} if kind == "linear" else {}
    cfg = scheduler_cfg(type=kind, warmup_steps=10, min_lr=1e-4, **extra)
    assert lr_factor(cfg, 0, 100, LR) == pytest.approx(0.1)  # (0 + 1) / 10
    assert lr_factor(cfg, 9, 100, LR) == 1.0


def test_linear_holds_then_decays_to_min_lr_on_the_last_step():
    cfg = scheduler_cfg(type="linear", warmup_steps=10, decay_steps=20, min_lr=1e-4)
    assert lr_factor(cfg, 79, 100, LR) == 1.0  # the last step before the decay
    assert lr_factor(cfg, 80, 100, LR) == pytest.approx(1 - 0.9 / 20)
    assert lr_factor(cfg, 99, 100, LR) == pytest.approx(0.1)  # min_lr / lr


def test_cosine_decays_from_the_peak_to_min_lr_on_the_last_step():
    cfg = scheduler_cfg(type="cosine", warmup_steps=10, min_lr=1e-4)
    first = lr_factor(cfg, 10, 100, LR)
    assert 0.99 < first < 1.0
    assert lr_factor(cfg, 54, 100, LR) == pytest.approx(0.1 + 0.9 * 0.5)  # update 45 of 90
    assert lr_factor(cfg, 99, 100, LR) == pytest.approx(0.1)


def test_the_optimizer_sees_the_factor_times_lr():
    cfg = scheduler_cfg(type="linear", warmup_steps=4, decay_steps=0)
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=LR)
    scheduler = build_scheduler(cfg, optimizer, max_steps=100)
    seen = []
    for _ in range(5):
        seen.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([LR * f for f in (0.25, 0.5, 0.75, 1.0, 1.0)])
