"""Tiny SFT runs for the trainer tests: a one-layer built-in model on fake or small chat data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trainspec.config import load

SFT = str(Path(sys.executable).with_name("sft"))

TINY = {
    "model.name": "builtin:tiny-qwen3",
    "model.seq_len": 64,
    "model.compile": None,
    "model.ac": None,
    "model.ac_offloading": None,
    "model.debug.num_layers": 1,
    "data.type": "fake",
    "data.seq_len": 32,
    "data.batch_size": 4,
    "data.micro_batch_size": 4,
    "optim.lr": 3e-3,
    "max_steps": 4,
    "run.name": "tiny",
}


def tiny_config(tmp_path: Path, **overrides):
    settings = {**TINY, "output_dir": str(tmp_path / "outputs")}
    settings.update({key.replace("__", "."): value for key, value in overrides.items()})
    return load("sft", [], settings).config


def run_dir(config) -> Path:
    return Path(config.output_dir) / config.run.dir


def metrics(config) -> list[dict]:
    path = run_dir(config) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def losses(config) -> dict[int, float]:
    return {m["step"]: m["loss"] for m in metrics(config) if "loss" in m}


def sft_in_process(*args: str) -> subprocess.CompletedProcess:
    """`sft ARGS...` in this process (in_process.py)."""
    from helpers.in_process import command_in_process
    from trainspec.trainers.sft.main import main

    return command_in_process(main, SFT, *args)


def flags(settings: dict) -> list[str]:
    """The same settings as `sft` command-line overrides."""
    args = []
    for key, value in settings.items():
        if value is None:
            args += [f"--{key}", "None"]
        else:
            args += [f"--{key}", json.dumps(value) if not isinstance(value, str) else value]
    return args


def sft_process(tmp_path: Path, *extra: str, **popen) -> subprocess.Popen:
    settings = {**TINY, "output_dir": str(tmp_path / "outputs")}
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [SFT, *flags(settings), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **popen,
    )


# Two questions, each answer with its reasoning: what history-rewriting templates and the
# reference's named renderers treat differently.
THINKING_CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4", "reasoning_content": "add"},
    {"role": "user", "content": "3+3?"},
    {"role": "assistant", "content": "6", "reasoning_content": "add again"},
]
