"""--help SECTION, and what every --help says about a setting: the variant a setting belongs to,
its bounds, and its default as TOML writes it (never `{}` for a sub-table)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import ROOT, run_cli

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.cli.help import config_flags_help
from trainspec.config.kinds import ALL_KINDS

SFT = Path(sys.executable).with_name("sft")


def entries(text: str) -> dict[str, str]:
    """{flag line: its description} of a settings listing."""
    found: dict[str, str] = {}
    flag = None
    for line in text.splitlines():
        if line.startswith("  --"):
            flag = line.strip()
            found[flag] = ""
        elif flag and line.startswith("      "):
            found[flag] += " " + line.strip()
    return {key: value.strip() for key, value in found.items()}


def test_help_section_without_a_kind() -> None:
    result = run_cli("--help", "optim")
    assert result.code == 0, result.stderr
    assert result.stdout.startswith("rl and sft config settings under optim (--key VALUE):\n")
    flags = [line.split()[0].rstrip(",") for line in result.stdout.splitlines() if "  --" in line]
    assert flags and all(flag.startswith("--optim") for flag in flags)
    assert "usage:" not in result.stdout and "--model.name" not in result.stdout


def test_help_section_of_a_file_kind() -> None:
    result = run_cli(str(ROOT / "configs/sft/tiny.toml"), "--help", "data")
    assert result.code == 0
    assert result.stdout.startswith("sft config settings under data (--key VALUE):\n")
    assert "  --data.loss_mask.assistant, --no-data.loss_mask.assistant  (data.type sft)" in (
        result.stdout
    )
    assert "  --data.length  (data.type fake)" in result.stdout


def test_variant_labels() -> None:
    found = entries(config_flags_help("rl", section="optim"))
    assert "--optim.momentum  (optim.type sgd)" in found
    assert "--optim.betas1  (optim.type adamw, muon)" in found
    assert "--optim.lr" in found  # every variant has it: no label
    assert found["--optim.type"].startswith("Which optim variant this is")


def test_bounds_are_shown() -> None:
    found = entries(config_flags_help("rl"))
    assert "Takes a number (in [0, 1])." in found["--optim.lr"]
    assert re.search(r"Takes an integer (\(|or )", found["--model.seq_len"])
    assert "(>= 1)" in found["--model.seq_len"]
    assert "(each >= 0)" in found["--log.ranks_filter"]


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_defaults_are_toml_values_never_empty_tables(kind: str) -> None:
    text = config_flags_help(kind)
    assert "{}" not in text
    assert "(default: null)" not in text  # TOML has no null: "None"
    found = entries(text)
    if kind in ("rl", "sft"):
        assert found["--model.compile, --no-model.compile"].endswith("(default: on)")
        assert found["--ckpt, --no-ckpt"].endswith("(default: off)")
        assert found["--max_steps"].endswith('(default: "None")')
        assert found["--optim"].endswith('(default: {type = "adamw"})')


def test_a_default_is_never_split_across_lines() -> None:
    for line in config_flags_help("rl").splitlines():
        assert not line.rstrip().endswith("(default:"), line


def test_unknown_section_is_a_usage_error() -> None:
    result = run_cli("--help", "optimm")
    assert result.code == 2
    assert "optimm is not a setting or table" in result.stderr
    assert "did you mean optim" in result.stderr
    result = run_cli("--kind", "sft", "--help", "loss")  # an rl section
    assert result.code == 2 and "of sft configs" in result.stderr


def test_help_without_section_is_unchanged() -> None:
    result = run_cli("--kind", "rl", "--help")
    assert result.code == 0
    assert result.stdout.startswith("usage: validate-config")
    assert "rl config settings (--key VALUE):" in result.stdout
    assert "--help [SECTION]" in result.stdout


def test_a_file_after_help_is_a_file_not_a_section() -> None:
    result = run_cli("--help", str(ROOT / "configs/sft/tiny.toml"))
    assert result.code == 0 and "sft config settings (--key VALUE):" in result.stdout


def test_entrypoint_help_section() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_entrypoint("sft", "sft", ["--help", "model"], out, err, lambda config: 0)
    assert code == 0, err.getvalue()
    text = out.getvalue()
    assert text.startswith("settings under model (--key VALUE; defaults in parentheses):\n")
    assert "--model.name" in text and "--optim.lr" not in text and "usage:" not in text
    out, err = io.StringIO(), io.StringIO()
    code = run_entrypoint("sft", "sft", ["--help", "modle"], out, err, lambda config: 0)
    assert code == 2 and "did you mean model" in err.getvalue()


def test_sft_help_section_through_the_console_script() -> None:
    result = subprocess.run(
        [str(SFT), "--help", "optim"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "  --optim.momentum  (optim.type sgd)" in result.stdout
    assert "--model.name" not in result.stdout


@pytest.mark.parametrize(
    "schema, text",
    [
        ({"minimum": 0}, ">= 0"),
        ({"exclusiveMinimum": 0}, "> 0"),
        ({"maximum": 1}, "<= 1"),
        ({"exclusiveMaximum": 1.0}, "< 1.0"),
        ({"exclusiveMinimum": 0, "exclusiveMaximum": 1}, "in (0, 1)"),
        ({"minimum": 1, "maximum": 65535}, "in [1, 65535]"),
        ({"minimum": 0, "exclusiveMaximum": 1}, "in [0, 1)"),
        ({"type": "number"}, None),
    ],
)
def test_bound_notation(schema: dict, text: str | None) -> None:
    from trainspec.config.schema_info import bound_text

    assert bound_text(schema) == text


def test_bounds_from_the_bundled_schema_reach_help() -> None:
    """Every bound the schema states on a listed setting is shown with it."""
    from trainspec.config.schema_info import schema_info

    found = entries(config_flags_help("rl"))
    limited = {p: k.limits for p, k in schema_info("rl").keys.items() if k.limits}
    assert len(limited) > 20
    for path, text in limited.items():
        flag = next((f for f in found if f.split()[0].rstrip(",") == "--" + ".".join(path)), None)
        if flag is not None:
            assert f"({text})" in found[flag], (flag, text)
