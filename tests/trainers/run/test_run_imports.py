"""The run/ pieces load without torch and the other heavy libraries: a process that only reads
metrics or plots pays for none of them."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from trainspec.trainers.run import collector, console, control, heartbeat, monitor, plot, profiler
from trainspec.trainers.run import run_dir
print(",".join(m for m in ("torch", "matplotlib", "tqdm", "wandb") if m in sys.modules) or "none")
"""


def test_these_modules_import_nothing_heavy():
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=300
    )
    assert result.stdout.strip() == "none"
