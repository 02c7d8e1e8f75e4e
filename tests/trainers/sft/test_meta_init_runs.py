"""Two torchrun processes train a real family exactly as one does, though rank 1 builds its model
on the meta device and receives its shards from rank 0 (parallel.fill_from_rank0): the loss of
every step matches, so every weight and buffer (rotary tables, tied and learned position
embeddings, LoRA adapters) arrived."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.families import save_tiny_model
from helpers.sft_support import SFT, TINY, flags, sft_in_process

from trainspec.trainers.builtin import MODELS

WAIT = 480  # seconds; generous for a busy 2-core machine
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def model_dir(family: str, root: Path) -> Path:
    """The family's tiny model without dropout: the two runs draw different random masks."""
    path = save_tiny_model(family, root / family)
    config = json.loads((path / "config.json").read_text())
    for key in ("resid_pdrop", "embd_pdrop", "attn_pdrop"):  # GPT-2's; 0 elsewhere already
        if key in config:
            config[key] = 0.0
    (path / "config.json").write_text(json.dumps(config))
    for name in TOKENIZER_FILES:
        shutil.copy(MODELS["tiny-qwen3"] / name, path / name)
    return path


def losses(out: Path, processes: int, settings: dict) -> list[float]:
    """The run's losses: one process is this one (sft_in_process), two are torchrun's."""
    args = [*flags({**settings, "output_dir": str(out)}), "--deployment.num-train-gpus"]
    args.append(str(processes))
    if processes == 1:
        done = sft_in_process(*args)
    else:
        done = subprocess.run([SFT, *args], capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = (out / "tiny" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]


def test_two_processes_with_a_meta_rank_train_as_one(tmp_path):
    """GPT-2 (tied Conv1D head, learned positions) with LoRA adapters on its Conv1D attention."""
    settings = {
        **TINY,
        "model.name": str(model_dir("gpt2", tmp_path)),
        "model.debug.num_layers": None,
        "max_steps": 3,
        "model.lora": {"rank": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": ["c_attn"]},
    }
    one = losses(tmp_path / "one", 1, settings)
    two = losses(tmp_path / "two", 2, settings)
    assert len(one) == 3
    assert two == pytest.approx(one, rel=1e-4)
