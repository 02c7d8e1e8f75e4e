"""`--print --format toml` (validate-config) and `--print-config --format toml` (sft, rl): the
resolved config as TOML, with a `#:schema` first line and "None" for null, that validate-config
reads back to the same resolved config."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cli_support import CONFIGS, ROOT, run_cli

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.cli.inputs import kind_of_text

VALIDATE = Path(sys.executable).with_name("validate-config")


def resolved_json(*argv: str) -> dict:
    result = run_cli(*argv, "--print")
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("config", CONFIGS, ids=[str(p.relative_to(ROOT)) for p in CONFIGS])
def test_every_example_round_trips_through_toml(config: Path, tmp_path: Path) -> None:
    result = run_cli(str(config), "--print", "--format", "toml")
    assert result.code == 0, result.stderr
    assert "valid" in result.stderr  # the report moves to stderr, as with --print
    text = result.stdout
    kind = kind_of_text(config.read_bytes())
    assert text.startswith("#:schema ") and kind_of_text(text.encode()) == kind
    tomllib.loads(text)  # plain TOML
    printed = tmp_path / "printed.toml"
    printed.write_text(text)
    again = run_cli(str(printed), "--format", "json")  # the kind from its #:schema line
    assert again.code == 0, again.stdout
    assert json.loads(again.stdout)["config"] == resolved_json(str(config))
    # and printing the printed config gives the same text
    assert run_cli(str(printed), "--format", "toml").stdout == text


def test_null_is_written_as_none() -> None:
    text = run_cli(str(ROOT / "configs/rl/tiny.toml"), "--format", "toml").stdout
    document = tomllib.loads(text)
    assert document["max_steps"] == 4 and document["heartbeat"] == "None"
    assert "null" not in text.split("\n", 3)[-1]


def test_format_toml_implies_print_and_keeps_overrides(tmp_path: Path) -> None:
    result = run_cli(str(ROOT / "configs/sft/tiny.toml"), "--optim.lr", "3e-4", "--format", "toml")
    assert result.code == 0
    assert tomllib.loads(result.stdout)["optim"]["lr"] == 3e-4


def test_a_config_toml_cannot_hold_is_refused_not_printed_wrong() -> None:
    argv = [str(ROOT / "configs/rl/tiny.toml"), "--loss.type", "custom"]
    argv += ["--loss.import-path", "pkg.mod:loss", "--loss.kwargs", '{"scale": null}']
    assert resolved_json(*argv)["loss"]["kwargs"] == {"scale": None}
    result = run_cli(*argv, "--format", "toml")
    assert result.code == 2 and result.stdout == ""
    assert "loss.kwargs.scale cannot be written as TOML" in result.stderr
    assert "--format json" in result.stderr


def test_an_invalid_config_prints_no_toml() -> None:
    result = run_cli(str(ROOT / "configs/rl/tiny.toml"), "--max-steps", "0", "--format", "toml")
    assert result.code == 1 and result.stdout == ""
    assert "max_steps should be at least 1" in result.stderr


def test_print_with_each_is_a_usage_error() -> None:
    result = run_cli("--each", str(ROOT / "configs/rl/tiny.toml"), "--print")
    assert result.code == 2 and "drop --each" in result.stderr


def entry(kind: str, prog: str, *argv: str) -> tuple[int, str, str, list]:
    calls: list = []
    out, err = io.StringIO(), io.StringIO()
    code = run_entrypoint(kind, prog, list(argv), out, err, calls.append)  # type: ignore[arg-type]
    return code, out.getvalue(), err.getvalue(), calls


@pytest.mark.parametrize(
    "kind, prog, config",
    [("sft", "sft", "configs/sft/demo.toml"), ("rl_run", "rl", "configs/rl/demo.toml")],
)
def test_print_config_format_toml(kind: str, prog: str, config: str, tmp_path: Path) -> None:
    argv = (str(ROOT / config), "--print-config", "--format", "toml")
    code, out, err, calls = entry(kind, prog, *argv)
    assert code == 0 and calls == [], err
    printed = tmp_path / "printed.toml"
    printed.write_text(out)
    assert resolved_json(str(printed)) == resolved_json(str(ROOT / config))
    code, out, _, _ = entry(kind, prog, str(ROOT / config), "--print-config")  # JSON by default
    assert json.loads(out) == resolved_json(str(ROOT / config))


def test_format_toml_without_print_config_does_not_train() -> None:
    code, out, err, calls = entry(
        "sft", "sft", str(ROOT / "configs/sft/tiny.toml"), "--format", "toml"
    )
    assert code == 2 and calls == [] and out == ""
    assert "add --print-config" in err


def test_toml_round_trip_through_the_console_script(tmp_path: Path) -> None:
    config = ROOT / "configs/rl/qwen3-30b-a3b-math.toml"
    printed = subprocess.run(
        [str(VALIDATE), str(config), "--print", "--format", "toml"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert printed.returncode == 0, printed.stderr
    again = subprocess.run(
        [str(VALIDATE), "-", "--print"],
        input=printed.stdout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == resolved_json(str(config))
