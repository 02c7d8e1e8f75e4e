"""The validate path and the trainers' dry runs never import torch or transformers."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers.support import ROOT

PROBE = """
import io, sys
import trainspec
from trainspec.cli.validate_config import run
for argv in (["configs/rl/qwen3-30b-a3b-math.toml", "--explain"],
             ["configs/sft/tiny.toml", "--max-steps", "0", "--format", "json"],
             ["tests/config/reference/sft/examples-wordle.toml"],  # no #:schema: keys tell
             ["tests/config/reference/rl-trainer/debug-fake.toml", "--max-steps", "0"]):
    run(argv, io.StringIO(), io.StringIO())
print(",".join(m for m in ("torch", "transformers") if m in sys.modules) or "none")
"""


def test_validate_path_imports_no_torch():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "none"


DRY_RUNS = """
import sys
from trainspec.trainers.rl_run.main import main as rl
from trainspec.trainers.sft.main import main as sft
out = sys.argv[1]
codes = [
    rl(["configs/rl/demo.toml", "--slurm.job-name", "t", "--dry-run", "--output-dir", out]),
    rl(["configs/rl/demo.toml", "--print-config", "--output-dir", out]),
    sft(["tests/trainers/slurm/slim_sft.toml", "--dry-run", "--output-dir", out]),
    sft(["configs/sft/demo.toml", "--dry-run", "--output-dir", out]),
]
print(codes, ",".join(m for m in ("torch", "transformers") if m in sys.modules) or "none")
"""


def test_dry_runs_import_no_torch(tmp_path):
    """`sft` and `rl` with --dry-run, with and without [slurm], answer in well under a second:
    they write the job script and the resolved configs without the trainers' libraries."""
    result = subprocess.run(
        [sys.executable, "-c", DRY_RUNS, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "SLURM_CONF": str(tmp_path / "no-cluster.conf")},  # sinfo: no answer
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[0, 0, 0, 0] none", result.stderr
