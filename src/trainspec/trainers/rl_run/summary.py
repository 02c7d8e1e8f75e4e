"""What `rl` says at the end: the closing summary of the run."""

from __future__ import annotations

from pathlib import Path

from ..orchestrator.rl_plot import (
    ORCHESTRATOR_METRICS,
    TRAINER_METRICS,
    held_out,
    read_jsonl,
)
from ..run.progress import duration


def _first_last(records: list[dict], key: str, window: int = 10) -> tuple[float, float] | None:
    """Mean of the first and of the last `window` values of `key` (single values for evals)."""
    values = [r[key] for r in records if isinstance(r.get(key), int | float)]
    if not values:
        return None
    window = min(window, max(1, len(values) // 2))
    return sum(values[:window]) / window, sum(values[-window:]) / window


def summarize(run_dir: Path, stopped: bool = False, seconds: float | None = None) -> str:
    """The summary line of a run that ended well, or was stopped on request (the orchestrator
    drew rl.png when it ended), with the run's total time when `seconds` is given."""
    trainer = read_jsonl(run_dir / TRAINER_METRICS)
    evals = held_out(read_jsonl(run_dir / ORCHESTRATOR_METRICS))
    steps = max((r.get("step", 0) for r in trainer), default=0)
    took = f" in {duration(seconds)}" if seconds is not None else ""
    parts = [f"rl: {'stopped' if stopped else 'done'} after step {steps}{took}: run {run_dir}"]
    reward = _first_last(trainer, "reward")
    if reward:
        parts.append(f"mean reward {reward[0]:.3f} -> {reward[1]:.3f} (first/last 10 steps)")
    exact = _first_last(evals, "eval_exact_match", window=1)
    held_out_reward = _first_last(evals, "eval_reward", window=1)
    if exact:
        parts.append(f"held-out exact match {exact[0]:.1%} -> {exact[1]:.1%}")
    elif held_out_reward:  # sources of your own data: their reward is the measure
        first, last = held_out_reward
        parts.append(f"held-out reward {first:.3f} -> {last:.3f}")
    plot = run_dir / "rl.png"
    if plot.is_file():
        parts.append(f"plot {plot}")
    return "; ".join(parts)
