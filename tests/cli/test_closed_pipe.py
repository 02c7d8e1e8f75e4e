"""A reader that stops early (`validate-config ... --explain | head`) is no verdict on the config:
the command exits quietly with 141, as a process killed by SIGPIPE, never 1 ("invalid")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

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


@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize(
    "argv",
    [["configs/sft/demo.toml", "--explain"], ["--kind", "rl", "--help"], ["--help", "model"]],
    ids=["explain", "help", "help-section"],
)
def test_closed_pipe_whatever_the_buffering(argv: list[str], unbuffered: bool):
    """Buffered output (the default outside this test environment) reaches the pipe only at
    the final flush: that flush is inside the command, so a gone reader is still a quiet 141."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [VALIDATE, *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("argv", ["configs/sft/demo.toml --explain", "--kind rl --help"])
def test_piped_into_head(argv: str):
    """`validate-config ... | head -1`: the first line, then a quiet exit (0 if everything fit
    in the pipe before head left, 141 if not), never a traceback or "invalid"."""
    result = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {VALIDATE} {argv} | head -1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode in (0, 141), result.stderr
    assert len(result.stdout.splitlines()) == 1
    assert result.stderr == ""


@pytest.mark.parametrize(
    "argv", [["--help"], ["--help", "model"], ["configs/sft/demo.toml", "--dry-run"]]
)
def test_training_entrypoint_output_into_a_closed_pipe(argv: list[str]):
    """`sft --help | head`: the same quiet 141, not a traceback (nothing trains)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [str(Path(sys.executable).with_name("sft")), *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""
