"""--explain --changed (only the settings whose resolved value differs from the default) and
--explain KEY (one key or table: value, where it was set, default, description)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import ROOT, run_cli

TINY_RL = str(ROOT / "configs" / "rl" / "tiny.toml")


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "run.toml"
    path.write_text("#:schema ../rl_trainer.json\n" + text)
    return str(path)


def rows(text: str) -> dict[str, str]:
    """`path = value  # origin` lines as {path: origin}."""
    found = {}
    for line in text.splitlines():
        if " = " in line and "  # " in line:
            found[line.split(" = ", 1)[0]] = line.split("  # ", 1)[1]
    return found


def test_changed_lists_only_what_differs_from_the_defaults(tmp_path: Path) -> None:
    cfg = write(
        tmp_path,
        "max_steps = 10\n[optim]\nlr = 1e-6\n"  # lr written, but equal to its default
        'type = "sgd"\n',
    )
    result = run_cli(cfg, "--explain", "--changed", "--model.seq-len", "512")
    assert result.code == 0, result.stderr
    found = rows(result.stdout)
    assert found == {
        "max_steps": f"{cfg}:2",
        "optim.type": f"{cfg}:5",
        "model.seq_len": "--model.seq-len",
    }
    full = rows(run_cli(cfg, "--explain").stdout)
    assert len(full) > 3 * len(found) and "optim.momentum" in full  # a default of sgd


def test_changed_includes_values_the_rules_derived() -> None:
    found = rows(run_cli(TINY_RL, "--explain", "--changed").stdout)
    assert found["tokenizer.name"] == "derived by the rules (default null)"  # from model.name
    assert "optim.weight_decay" not in found  # "auto" resolves to the same value as by default
    assert found["model.debug.num_layers"] == f"{TINY_RL}:16"


def test_changed_alone_implies_explain() -> None:
    assert rows(run_cli(TINY_RL, "--changed").stdout) == rows(
        run_cli(TINY_RL, "--explain", "--changed").stdout
    )


def test_changed_with_nothing_changed(tmp_path: Path) -> None:
    result = run_cli(write(tmp_path, ""), "--explain", "--changed")
    assert result.code == 0
    assert result.stdout.splitlines()[-1] == "# every setting has its default value"


def test_explain_one_key(tmp_path: Path) -> None:
    result = run_cli(TINY_RL, "--explain", "optim.lr")
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()[1:]  # after the verdict
    assert lines[:3] == [
        "optim.lr = 0.0001",
        f"    set by:  {TINY_RL}:22",
        "    default: 1e-06",
    ]
    assert lines[3].strip().startswith("Peak learning rate. Takes a number (in [0, 1]")


def test_explain_a_default_and_a_null(tmp_path: Path) -> None:
    result = run_cli(TINY_RL, "--explain", "ckpt.keep-last")  # kebab-case works too
    assert result.stdout.splitlines()[1:4] == [
        'ckpt.keep_last = "None"',
        "    set by:  not set: the default",
        '    default: "None"',
    ]


def test_explain_a_table_prefix() -> None:
    result = run_cli(TINY_RL, "--explain", "optim")
    heads = [line for line in result.stdout.splitlines() if " = " in line]
    assert [head.split(" = ")[0] for head in heads] == [
        "optim.lr",
        "optim.weight_decay",
        "optim.max_norm",
        "optim.type",
        "optim.betas1",
        "optim.betas2",
    ]
    assert 'default "auto", resolved for rl' in result.stdout


def test_explain_a_key_with_changed() -> None:
    result = run_cli(TINY_RL, "--explain", "optim", "--changed")
    heads = [line for line in result.stdout.splitlines() if " = " in line]
    assert heads == ["optim.lr = 0.0001"]


def test_explain_a_setting_of_another_variant() -> None:
    result = run_cli(TINY_RL, "--explain", "optim.momentum")
    assert result.code == 0
    assert result.stdout.splitlines()[-1] == (
        "# optim.momentum is not part of this config: it is a setting of optim.type sgd, and "
        'optim.type is "adamw"'
    )


@pytest.mark.parametrize("form", ["text", "json"])
def test_explain_an_unknown_key_is_a_usage_error(form: str) -> None:
    result = run_cli(TINY_RL, "--explain", "optim.lrr", "--format", form)
    assert result.code == 2
    assert "optim.lrr is not a setting of rl configs; did you mean optim.lr?" in result.stderr


def test_a_file_after_explain_is_still_a_file() -> None:
    result = run_cli("--explain", TINY_RL)
    assert result.code == 0
    assert rows(result.stdout)["max_steps"] == f"{TINY_RL}:4"
