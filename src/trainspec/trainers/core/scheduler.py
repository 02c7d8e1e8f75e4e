"""The learning-rate schedule, built from `[scheduler]`: constant, linear or cosine.

    scheduler = build_scheduler(config.scheduler, optimizer, max_steps=config.max_steps)

Linear and cosine warm up from 0 to optim.lr over `warmup_steps`; linear then holds and decays
to `min_lr` over the last `decay_steps` steps, cosine decays to `min_lr` from the end of warmup
to max_steps. The schedule is a LambdaLR, so its state checkpoints like any torch scheduler.
"""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def lr_factor(scheduler_cfg, step: int, max_steps: int | None, peak_lr: float) -> float:
    """Multiplier of optim.lr for the update at `step` (0-based)."""
    if scheduler_cfg.type == "constant":
        return 1.0
    warmup = scheduler_cfg.warmup_steps
    if warmup and step < warmup:
        return (step + 1) / warmup
    floor = scheduler_cfg.min_lr / peak_lr if peak_lr > 0 else 0.0
    if max_steps is None:
        return 1.0
    if scheduler_cfg.type == "linear":
        decay = scheduler_cfg.decay_steps
        start = max_steps - decay
        if decay <= 0 or step < start:
            return 1.0
        progress = min(1.0, (step - start + 1) / decay)
        return 1.0 - (1.0 - floor) * progress
    span = max(1, max_steps - warmup)
    progress = min(1.0, (step - warmup + 1) / span)
    return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(scheduler_cfg, optimizer: Optimizer, *, max_steps: int | None) -> LambdaLR:
    peak = optimizer.param_groups[0]["lr"]
    return LambdaLR(optimizer, lambda step: lr_factor(scheduler_cfg, step, max_steps, peak))
