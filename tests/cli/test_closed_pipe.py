"""A reader that stops early (`validate-config ... --explain | head`) is no verdict on the config:
the command exits quietly with 141, as a process killed by SIGPIPE, never 1 ("invalid")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support import ROOT

VALIDATE = str(Path(sys.executable).with_name("validate-config"))


def test_output_into_a_closed_pipe_is_not_called_invalid():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line is written
    try:
        result = subprocess.run(
            [VALIDATE, str(ROOT / "configs" / "sft" / "demo.toml"), "--explain"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""  # no traceback, no "Exception ignored" at exit
