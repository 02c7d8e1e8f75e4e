"""Two RL trainer processes (torchrun, FSDP over gloo) with deliberately uneven shares: one rank
gets three micro-batches, the other one. Every rank still runs the same number of passes, so
the step finishes, and its loss is the loss one process computes on all four."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.in_process import command_in_process
from rl_support import metrics, random_samples, trainer_config

from trainspec.trainers.rl.main import main as rl_trainer_main
from trainspec.trainers.wire.batch import RolloutBatch, pack_samples
from trainspec.trainers.wire.transport import build_sender

STEPS = 2


def config_file(run_dir: Path) -> Path:
    path = run_dir.with_suffix(".toml")
    path.write_text(
        f"""max_steps = {STEPS}
output_dir = "{run_dir}"
dist_timeout_seconds = 120

[model]
name = "builtin:tiny-qwen3"
seq_len = 64
compile = "None"
ac = "None"
ac_offloading = "None"

[model.debug]
num_layers = 1

[optim]
lr = 1e-2

[rollout_transport]
type = "filesystem"
"""
    )
    return path


def micro_batches(step: int):
    """Four micro-batches of one row each, from the orchestrator's packing."""
    (share,) = pack_samples(
        random_samples(step, count=16), seq_len=64, micro_batch_size=1, ranks=1, pad_id=0
    )
    assert len(share) >= 4
    return share[:4]


def send(run_dir: Path, shares_of) -> None:
    config = trainer_config(run_dir)
    sender = build_sender(config.rollout_transport, run_dir, len(shares_of(0)))
    for step in range(STEPS):
        for rank, share in enumerate(shares_of(step)):
            sender.send(step, rank, RolloutBatch(step, step, 1.0, share, reward=0.0))
    sender.close()


def train(config: Path, processes: int) -> subprocess.CompletedProcess:
    """rl-trainer on `config`: one process is this one, two are torchrun's."""
    if processes == 1:
        return command_in_process(rl_trainer_main, "rl-trainer", str(config))
    launcher = ["-m", "torch.distributed.run", f"--nproc-per-node={processes}"]
    command = [sys.executable, *launcher, "-m", "trainspec.trainers.rl.main", str(config)]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_uneven_shares_train_like_one_process(tmp_path):
    losses = {}
    for processes, shares_of in (
        (1, lambda step: [micro_batches(step)]),
        (2, lambda step: [micro_batches(step)[:3], micro_batches(step)[3:]]),
    ):
        run_dir = tmp_path / f"run{processes}"
        send(run_dir, shares_of)
        result = train(config_file(run_dir), processes)
        assert result.returncode == 0, result.stderr[-3000:]
        losses[processes] = [m["loss"] for m in metrics(run_dir)]
    assert len(losses[2]) == STEPS
    assert losses[2] == pytest.approx(losses[1], rel=1e-5, abs=1e-7)
