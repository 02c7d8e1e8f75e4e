"""The installed `validate-config` console script, run as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import ROOT

SCRIPT = Path(sys.executable).with_name("validate-config")
TINY_RL = ROOT / "configs" / "rl" / "tiny.toml"
BAD = '#:schema ../schema/rl_trainer.json\nmax_steps = 4\n\n[optim]\nlr = "fast"\n'

pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason=f"{SCRIPT} is not installed")


def validate(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(SCRIPT), *argv], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    return result


@pytest.fixture
def bad(tmp_path: Path) -> Path:
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    return path


def test_valid_config_exits_0() -> None:
    result = validate(str(TINY_RL.relative_to(ROOT)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid rl config" in result.stdout
    assert result.stderr == ""


def test_invalid_config_exits_1_with_the_position(bad: Path) -> None:
    result = validate("bad.toml", cwd=bad.parent)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "bad.toml:5:6: error: optim.lr" in result.stdout
    assert "invalid rl config (1 error" in result.stdout


def test_invalid_config_json_report(bad: Path) -> None:
    result = validate(str(bad), "--format", "json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False
    (error,) = report["errors"]
    assert (error["file"], error["line"], error["column"], error["path"]) == (
        str(bad),
        5,
        6,
        "optim.lr",
    )


def test_missing_file_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    result = validate(str(missing), "--kind", "rl")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == f"{missing}: no such file or directory"


def test_github_format_annotates_the_file(bad: Path) -> None:
    result = validate("bad.toml", "--format", "github", cwd=bad.parent)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("::error file=") for line in lines), lines
    assert lines[0].startswith("::error file=bad.toml,line=5,col=6,")


def test_github_format_for_a_toml_syntax_error(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text("#:schema ../schema/sft_trainer.json\n[model\n")
    result = validate("broken.toml", "--format", "github", cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stdout.splitlines()
    assert line.startswith("::error file=broken.toml,line=2,col=7,"), line
    assert result.stderr.startswith("broken.toml:2:7: is not valid TOML")


def test_github_format_for_an_override_error() -> None:
    result = validate(str(TINY_RL), "--optim.lrr", "1e-5", "--format", "github")
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith("::error title=trainspec optim.lrr::--optim.lrr: "), line


@pytest.mark.parametrize("form", [["@", "FILE"], ["@FILE"]])
def test_reference_style_at_file(bad: Path, form: list[str]) -> None:
    """`validate-config @ file.toml`, as the reference's entrypoints take a file."""
    argv = [token.replace("FILE", str(bad)) for token in form]
    result = validate(*argv)
    assert result.returncode == 1
    assert f"{bad}:5:" in result.stdout


def test_json_report_for_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    result = validate(str(missing), "--kind", "rl", "--format", "json")
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert (report["valid"], report["config"]) == (False, None)
    [error] = report["errors"]
    assert (error["file"], error["category"]) == (str(missing), "file")
    assert result.stderr.strip() == f"{missing}: no such file or directory"  # unchanged


def test_json_report_for_a_usage_error() -> None:
    result = validate(str(TINY_RL), "--fromat", "json", "--format", "json")
    assert result.returncode == 2
    [error] = json.loads(result.stdout)["errors"]
    assert error["category"] == "usage" and "did you mean --format?" in error["message"]
