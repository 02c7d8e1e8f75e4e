"""The validate path never imports torch or transformers."""

from __future__ import annotations

import subprocess
import sys

from support import ROOT

PROBE = """
import io, sys
import trainspec
from trainspec.cli.validate_config import run
for argv in (["configs/rl/qwen3-30b-a3b-math.toml", "--explain"],
             ["configs/sft/tiny.toml", "--max-steps", "0", "--format", "json"]):
    run(argv, io.StringIO(), io.StringIO())
print(",".join(m for m in ("torch", "transformers") if m in sys.modules) or "none")
"""


def test_validate_path_imports_no_torch():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "none"
