"""A small orchestrator run's config, for the orchestrator's tests."""

from __future__ import annotations

from pathlib import Path

from trainspec.config import load

REVERSE_TEXT = {"env": {"taskset": {"id": "builtin:reverse-text"}}}


def small_run(run_dir: Path, steps: int, **settings):
    """An orchestrator config of `steps` small steps (4 prompts x 2, 4 new tokens) in `run_dir`."""
    small = {
        "batch_size": 4,
        "group_size": 2,
        "seq_len": 64,
        "train.sampling.max_completion_tokens": 4,
        "train.source": [REVERSE_TEXT],
    }
    files = {"rollout_transport.type": "filesystem"}
    return load(
        "orchestrator",
        [],
        {"output_dir": str(run_dir), "max_steps": steps, **small, **files, **settings},
    ).config
