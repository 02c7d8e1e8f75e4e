"""`python -m trainspec.config` behaves like validate-config: positions in errors, exit 1 for an
invalid config, 2 for usage, I/O and internal errors, a quiet 141 for a closed pipe, and never
a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

from trainspec.config import __main__ as main_module
from trainspec.config import load, validate

RL = "#:schema ../schema/rl_trainer.json\n"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main_module.run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_valid_config_prints_json_that_reloads(tmp_path: Path) -> None:
    path = ROOT / "configs" / "rl" / "tiny.toml"
    code, out, err = run("rl", str(path))
    assert (code, err) == (0, "")
    printed = json.loads(out)
    assert validate("rl", printed).config == load("rl", [path]).config
    assert printed["max_steps"] == 4  # the file's value, not a default


def test_an_invalid_config_exits_1_with_positions(tmp_path: Path) -> None:
    config = write(tmp_path, "run.toml", RL + 'max_steps = "many"\n')
    code, out, err = run("rl", str(config))
    assert (code, out) == (1, "")
    assert err.startswith(f"{config}:2:13: error: max_steps should be ")
    assert "\n    fix: " in err


def test_deep_nesting_exits_1_located(tmp_path: Path) -> None:
    config = write(tmp_path, "run.toml", RL + "[" + ".".join(["a"] * 1000) + "]\n")
    code, out, err = run("rl", str(config))
    assert code == 1
    assert err.startswith(f"{config}:2:2: error: a.a.a")
    assert "is nested more than 24 levels deep" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "no kind given; choose one of rl, sft"),
        (["ppo"], "unknown kind 'ppo'; choose one of rl, sft"),
        (["rl", "--explain"], "unknown option --explain"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], message: str) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert err.startswith("usage: python -m trainspec.config {rl,sft")
    assert message in err


def test_help_exits_0() -> None:
    code, out, err = run("--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: python -m trainspec.config")


def test_an_unreadable_file_exits_2_with_one_line(tmp_path: Path) -> None:
    code, out, err = run("rl", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == f"{tmp_path}: is a directory, not a TOML file; pass the config file inside it\n"


@pytest.mark.parametrize("failure", [MemoryError(), RecursionError("too deep"), ValueError("x")])
def test_an_internal_error_exits_2_without_a_traceback(
    failure: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(main_module, "dump_json", broken)  # e.g. a serialization error
    code, out, err = run("rl")
    assert (code, out) == (2, "")
    assert err.startswith(f"python -m trainspec.config: internal error: {type(failure).__name__}")
    assert err.count("\n") == 1


def test_a_closed_pipe_exits_quietly() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        result = subprocess.run(
            [sys.executable, "-m", "trainspec.config", "rl"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""  # no traceback, no "Exception ignored" at exit


def test_head_c1_gets_one_byte_and_no_traceback() -> None:
    command = f'"{sys.executable}" -m trainspec.config rl | head -c1'
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert result.stdout == "{"
    assert result.stderr == ""
