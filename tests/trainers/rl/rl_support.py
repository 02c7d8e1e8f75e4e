"""Tiny RL runs for the tests: a one-layer built-in model, batches written by hand or by the
orchestrator's own pieces, everything in a temporary run directory."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from trainspec.config import load
from trainspec.trainers.wire.batch import RolloutBatch, Sample, pack_samples
from trainspec.trainers.wire.transport import build_sender

TRAINER = {
    "model.name": "builtin:tiny-qwen3",
    "model.seq_len": 64,
    "model.compile": None,
    "model.ac": None,
    "model.ac_offloading": None,
    "model.debug.num_layers": 1,
    "optim.lr": 1e-2,
    "max_steps": 4,
    "rollout_transport.type": "filesystem",
}


def trainer_config(run_dir: Path, **overrides):
    settings = {**TRAINER, "output_dir": str(run_dir)}
    settings.update({key.replace("__", "."): value for key, value in overrides.items()})
    return load("rl", [], settings).config


def random_samples(step: int, count: int = 8, vocab: int = 200) -> list[Sample]:
    """Samples that depend only on `step`: prompts of 6-10 tokens, completions of 2-6."""
    gen = torch.Generator().manual_seed(step)
    samples = []
    for _ in range(count):
        prompt = int(torch.randint(6, 11, (1,), generator=gen))
        completion = int(torch.randint(2, 7, (1,), generator=gen))
        ids = torch.randint(4, vocab, (prompt + completion,), generator=gen).tolist()
        samples.append(
            Sample(
                ids[:prompt],
                ids[prompt:],
                (-torch.rand(completion, generator=gen) * 4 - 1).tolist(),
                float(torch.randn(1, generator=gen)),
            )
        )
    return samples


def rollout(step: int, *, ranks: int = 1, policy_step: int | None = None) -> list[RolloutBatch]:
    shares = pack_samples(
        random_samples(step), seq_len=64, micro_batch_size=2, ranks=ranks, pad_id=0
    )
    policy = step if policy_step is None else policy_step
    return [RolloutBatch(step, policy, 1.0, share, reward=0.1 * step) for share in shares]


def send_steps(config, steps, ranks: int = 1) -> None:
    """Write the batches of `steps` through the config's (filesystem) transport."""
    sender = build_sender(config.rollout_transport, Path(config.output_dir), ranks)
    for step in steps:
        for rank, batch in enumerate(rollout(step, ranks=ranks)):
            sender.send(step, rank, batch)
    sender.close()


def metrics(run_dir: Path, name: str = "metrics.jsonl") -> list[dict]:
    path = Path(run_dir) / name
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
