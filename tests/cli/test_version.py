"""`--version` on every command (cli/version.py): trainspec's version and what it runs on,
from the installed distributions' metadata, before anything else on the line is read."""

from __future__ import annotations

import io
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
COMMANDS = ("sft", "rl", "rl-trainer", "orchestrator")


def test_validate_and_migrate_config_say_their_version():
    from trainspec.cli import migrate_config, validate_config

    for module, prog in ((validate_config, "validate-config"), (migrate_config, "migrate-config")):
        out, err = io.StringIO(), io.StringIO()
        assert module.run(["--version"], out, err) == 0, err.getvalue()
        assert out.getvalue().startswith(f"{prog} (trainspec {version('trainspec')}): python ")
        assert f"torch {version('torch')}" in out.getvalue()


@pytest.mark.parametrize("prog", COMMANDS)
def test_each_training_command_says_its_version(prog):
    """The console script as installed, with a config and an override beside the flag."""
    done = subprocess.run(
        [str(BIN / prog), "configs/missing.toml", "--max-steps", "3", "--version"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{prog} (trainspec {version('trainspec')}): python ")
    assert f"transformers {version('transformers')}" in done.stdout
