"""The config layer never pulls in torch or transformers."""

from __future__ import annotations

import subprocess
import sys

from helpers.support import ROOT

PROBE = """
import sys
import trainspec
import trainspec.config
from trainspec.config import dump_json, load
resolved = load("sft", ["configs/sft/tiny.toml"])
dump_json(resolved.config)
load("rl", ["configs/rl/qwen3-30b-a3b-math.toml"])
from trainspec.config.kind_inference import infer_kind
assert infer_kind([{"data": {"fake": {}}}]).kind == "rl"
heavy = sorted(m for m in ("torch", "transformers", "numpy") if m in sys.modules)
print(",".join(heavy) or "none")
"""


def test_config_layer_imports_without_torch():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "none"
