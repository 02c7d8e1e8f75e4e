"""What `rl` leaves and says at the end: the reward/loss plot and a closing summary."""

from __future__ import annotations

import json
from pathlib import Path

from ..run.plot import save_plot

RL_PANELS = (
    ("reward", ("reward", "eval_exact_match")),
    ("loss", ("loss",)),
)


def read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
    return records


def _first_last(records: list[dict], key: str, window: int = 10) -> tuple[float, float] | None:
    """Mean of the first and of the last `window` values of `key` (single values for evals)."""
    values = [r[key] for r in records if isinstance(r.get(key), int | float)]
    if not values:
        return None
    window = min(window, max(1, len(values) // 2))
    return sum(values[:window]) / window, sum(values[-window:]) / window


def summarize(run_dir: Path, stopped: bool = False) -> str:
    """Draw run_dir/rl.png and return the summary line (of a run that ended well, or was
    stopped on request)."""
    trainer = read_jsonl(run_dir / "metrics.jsonl")
    orchestrator = read_jsonl(run_dir / "orchestrator" / "metrics.jsonl")
    evals = [
        {"step": r["step"], "eval_exact_match": r["eval_exact_match"]}
        for r in orchestrator
        if "eval_exact_match" in r
    ]
    plot = save_plot(trainer + evals, run_dir / "rl.png", RL_PANELS)
    steps = max((r.get("step", 0) for r in trainer), default=0)
    parts = [f"rl: {'stopped' if stopped else 'done'} after step {steps}: run {run_dir}"]
    reward = _first_last(trainer, "reward")
    if reward:
        parts.append(f"mean reward {reward[0]:.3f} -> {reward[1]:.3f} (first/last 10 steps)")
    exact = _first_last(evals, "eval_exact_match", window=1)
    if exact:
        parts.append(f"held-out exact match {exact[0]:.1%} -> {exact[1]:.1%}")
    if plot:
        parts.append(f"plot {plot}")
    return "; ".join(parts)
