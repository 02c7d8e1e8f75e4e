"""The console scripts end the process right after the command (trainspec/cli/console_scripts.py):
what they printed must all arrive, with the command's exit code, however large and wherever it
goes."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import ROOT

from trainspec.cli.validate_config import run

SCRIPT = Path(sys.executable).with_name("validate-config")
CONFIG = "configs/rl/qwen3-30b-a3b-math.toml"
# Buffered output, as in a user's shell (this environment sets PYTHONUNBUFFERED, which would
# hide output lost at exit).
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}


def in_process(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return run(list(argv), out, io.StringIO()), out.getvalue()


@pytest.mark.parametrize("argv", [[CONFIG, "--print"], [CONFIG, "--explain"]])
def test_everything_printed_reaches_a_file(tmp_path, argv):
    target = tmp_path / "out.txt"
    with target.open("w") as handle:
        code = subprocess.run(
            [SCRIPT, *argv], stdout=handle, cwd=ROOT, env=ENV, timeout=120
        ).returncode
    expected_code, expected = in_process(*argv)
    assert code == expected_code == 0
    assert target.read_text() == expected
    if "--print" in argv:
        assert json.loads(target.read_text())["max_steps"] is not None


@pytest.mark.parametrize(
    ("argv", "code"),
    [([CONFIG], 0), ([CONFIG, "--max-steps", "x"], 1), (["--fromat", "json", CONFIG], 2)],
)
def test_the_exit_code_is_the_commands(argv, code):
    result = subprocess.run([SCRIPT, *argv], capture_output=True, cwd=ROOT, env=ENV, timeout=120)
    assert result.returncode == code
    assert (result.stdout + result.stderr).strip()


def test_a_large_report_through_a_pipe_arrives_whole():
    """More than a pipe's buffer (64 KiB): the reader gets every byte before the exit."""
    flags = [arg for n in range(400) for arg in (f"--env-vars.X{n}", "v" * 200)]
    writer = subprocess.Popen([SCRIPT, CONFIG, "--print", *flags], stdout=subprocess.PIPE, cwd=ROOT)
    reader = subprocess.run(["cat"], stdin=writer.stdout, capture_output=True, timeout=120)
    writer.stdout.close()
    assert writer.wait(timeout=120) == 0
    assert len(reader.stdout) > 65536
    assert len(json.loads(reader.stdout)["env_vars"]) == 401  # and the file's NCCL_DEBUG
