"""`weight_broadcast.type = "nccl"` end to end: `rl` starts vLLM on the first GPU with its NCCL
weight-transfer engine, the trainer on the second sends every step's weights into it
(wire/broadcast_nccl.py), and the orchestrator has the server receive each one, paused, the
served version checked (orchestrator/policy.py). NCCL puts each rank on a GPU of its own, so
this needs two GPUs and vLLM (scripts/gpu_check.sh runs it where they are)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL needs two GPUs"),
]
STEPS = 3


def tiny_model(path: Path) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from trainspec.trainers.builtin import builtin_model_dir

    source = builtin_model_dir("builtin:tiny-qwen3")
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(source)).save_pretrained(path)
    AutoTokenizer.from_pretrained(source).save_pretrained(path)
    return path


def test_every_step_reaches_the_server_over_nccl(tmp_path):
    pytest.importorskip("vllm", reason="vLLM is not installed")
    model = tiny_model(tmp_path / "model")
    config = tmp_path / "rl.toml"
    config.write_text(
        f"""max_steps = {STEPS}
seq_len = 256
output_dir = "{tmp_path / "run"}"

[model]
name = "{model}"

[deployment]
num_infer_gpus = 1
num_train_gpus = 1

[weight_broadcast]
type = "nccl"

[inference.vllm]
gpu_memory_utilization = 0.3
max_model_len = 512
enforce_eager = true

[orchestrator]
batch_size = 16
group_size = 4

[orchestrator.train.sampling]
max_completion_tokens = 8

[[orchestrator.train.source]]
env.taskset.id = "builtin:reverse-text"
"""
    )
    done = subprocess.run(
        [sys.executable, "-m", "trainspec.trainers.rl_run.main", str(config)],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "run"
    markers = sorted(p.parent.name for p in (run / "broadcasts").glob("*/NCCL"))
    assert markers == [f"step_{k}" for k in range(STEPS + 1)]  # each step sent, step 0 first
    rows = [json.loads(line) for line in (run / "orchestrator" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows if "reward" in r] == list(range(STEPS))
