"""The picture of an RL run, drawn by the orchestrator when it ends (it ends last: after the
trainer's final weights are evaluated), so a run started as `rl` and one started as
`rl-trainer` + `orchestrator` both leave `<output_dir>/rl.png`.

    draw_rl_plot(run_dir)      # reward, held-out exact match, loss; the path, or None
"""

from __future__ import annotations

import json
from pathlib import Path

from ..run.plot import RL_PANELS, save_plot

TRAINER_METRICS = "metrics.jsonl"
ORCHESTRATOR_METRICS = Path("orchestrator") / "metrics.jsonl"


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


HELD_OUT = ("eval_exact_match", "eval_reward")


def held_out(orchestrator: list[dict]) -> list[dict]:
    """The orchestrator's held-out figures by step: exact match (built-in tasksets) and the mean
    reward (every source)."""
    return [
        {"step": r["step"], **{key: r[key] for key in HELD_OUT if key in r}}
        for r in orchestrator
        if any(key in r for key in HELD_OUT)
    ]


def draw_rl_plot(run_dir: Path) -> Path | None:
    """rl.png of the trainer's reward and loss and the orchestrator's held-out evals."""
    trainer = read_jsonl(run_dir / TRAINER_METRICS)
    evals = held_out(read_jsonl(run_dir / ORCHESTRATOR_METRICS))
    return save_plot(trainer + evals, run_dir / "rl.png", RL_PANELS, title=run_dir.name)
