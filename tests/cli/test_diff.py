"""`validate-config diff A B`: the settings whose resolved values differ, each with both values
and where each was set; exit 0 the same, 1 different, 2 when a side cannot be checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_support import ROOT, run_cli

VALIDATE = Path(sys.executable).with_name("validate-config")
HEAD = "#:schema ../rl_trainer.json\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(HEAD + text)
    return str(path)


def test_two_spellings_of_one_config_are_the_same(tmp_path: Path) -> None:
    a = write(tmp_path, "a.toml", "max_steps = 10\n[optim]\nlr = 1e-6\n")
    b = write(tmp_path, "b.toml", 'max_steps = 10\n[optim]\ntype = "adamw"\n')  # both defaults
    result = run_cli("diff", a, b)
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{a}, {b}: the same config"


def test_differences_with_both_values_and_origins(tmp_path: Path) -> None:
    a = write(tmp_path, "a.toml", "max_steps = 10\n[optim]\nlr = 1e-5\n")
    b = write(tmp_path, "b.toml", 'max_steps = 20\n[optim]\ntype = "sgd"\n')
    result = run_cli("diff", a, b)
    assert result.code == 1, result.stderr
    text = result.stdout
    assert text.startswith(f"--- {a} (rl)\n+++ {b} (rl)\n")
    assert f"max_steps\n  - 10  # {a}:2\n  + 20  # {b}:2\n" in text
    assert f"optim.lr\n  - 1e-05  # {a}:4\n  + 1e-06  # default\n" in text
    assert "optim.momentum\n  - (absent)  # not in this config\n  + 0.9       # default\n" in text
    assert text.splitlines()[-1].endswith("settings differ")


def test_json_report(tmp_path: Path) -> None:
    a = write(tmp_path, "a.toml", "max_steps = 10\n")
    b = write(tmp_path, "b.toml", "")
    result = run_cli("diff", a, b, "--format", "json")
    assert result.code == 1
    report = json.loads(result.stdout)
    assert report["same"] is False
    assert report["a"] == {"file": a, "kind": "rl"} and report["b"] == {"file": b, "kind": "rl"}
    assert report["differences"] == [
        {
            "path": "max_steps",
            "a": {"value": 10, "origin": f"{a}:2"},
            "b": {"value": None, "origin": "default"},
        }
    ]


def test_a_side_that_cannot_be_checked_exits_2(tmp_path: Path) -> None:
    a = write(tmp_path, "a.toml", "max_steps = 10\n")
    bad = write(tmp_path, "bad.toml", "max_steps = 0\n")
    result = run_cli("diff", a, bad)
    assert result.code == 2 and result.stdout == ""
    assert f"{bad}:2:13: error: max_steps should be at least 1" in result.stderr
    result = run_cli("diff", a, str(tmp_path / "missing.toml"), "--format", "json")
    assert result.code == 2
    [error] = json.loads(result.stdout)["errors"]
    assert error["category"] == "file" and "no such file" in error["message"]


def test_diff_usage_errors() -> None:
    result = run_cli("diff", str(ROOT / "configs/rl/tiny.toml"))
    assert result.code == 2 and result.stderr.startswith("usage: validate-config diff")
    result = run_cli("diff", "a.toml", "b.toml", "--optim.lr", "1")
    assert result.code == 2 and "unrecognized arguments" in result.stderr


def test_diff_through_the_console_script() -> None:
    a, b = ROOT / "configs/rl/tiny.toml", ROOT / "configs/rl/demo-trainer.toml"
    result = subprocess.run(
        [str(VALIDATE), "diff", str(a), str(b)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert "\nmax_steps\n" in result.stdout and "Traceback" not in result.stderr
    same = subprocess.run(
        [str(VALIDATE), "diff", str(a), "-"],
        input=a.read_text(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert same.returncode == 0, same.stdout + same.stderr
