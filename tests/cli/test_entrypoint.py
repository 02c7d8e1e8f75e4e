"""The shared front of the training entrypoints: same grammar, --help, --print-config, then train;
the command implies the kind of a file that names none."""

from __future__ import annotations

import io
import json

import pytest
from helpers.support import ROOT

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.config.bundle import bundled_schema

TINY_SFT = str(ROOT / "configs" / "sft" / "tiny.toml")


def launch(*argv: str):
    calls = []
    out, err = io.StringIO(), io.StringIO()
    code = run_entrypoint("sft", "sft", list(argv), out, err, calls.append)
    return code, calls, out.getvalue(), err.getvalue()


def test_train_receives_the_resolved_config():
    code, calls, _, err = launch(TINY_SFT, "--max-steps", "7", "--optim.lr", "3e-4")
    assert code == 0, err
    [config] = calls
    assert (config.max_steps, config.optim.lr, config.optim.weight_decay) == (7, 3e-4, 0.01)


def test_print_config_and_sfts_dry_run_print_json_and_do_not_train():
    for flag in ("--print-config", "--dry-run", "--dry_run"):  # sft's dry run prints it too
        code, calls, out, _ = launch(TINY_SFT, flag)
        assert code == 0 and calls == []
        assert json.loads(out)["data"]["type"] == "fake"
    code, calls, out, err = launch(TINY_SFT, "--print-confg")  # a mistyped option: usage
    assert code == 2 and calls == []
    assert "unknown option --print-confg; did you mean --print-config?" in err
    code, calls, out, err = launch(TINY_SFT, "--dry-run-typo")  # a mistyped setting
    assert code == 1 and calls == []
    assert "--dry-run-typo: error: dry_run_typo is not a known setting\n" in err
    assert "    fix: did you mean --dry-run?\n" in err


def test_help_is_generated_from_the_schema():
    code, calls, out, _ = launch("--help-all")
    assert code == 0 and calls == []
    assert "--print-config" in out
    assert "--data.loss_mask.assistant, --no-data.loss_mask.assistant" in out
    assert "Train on assistant messages." in out and "(default: true)" in out


def test_invalid_config_and_bad_files_do_not_train(tmp_path):
    code, calls, _, err = launch(TINY_SFT, "--max-steps", "0")
    assert code == 1 and calls == [] and "--max-steps: error: max_steps should be at least 1" in err
    code, calls, _, err = launch(str(tmp_path / "missing.toml"))
    assert code == 2 and calls == [] and "missing.toml" in err


REFERENCE = ROOT / "tests" / "config" / "reference"
COMMANDS = [
    ("sft", "sft"),
    ("rl", "rl-trainer"),
    ("orchestrator", "orchestrator"),
    ("rl_run", "rl"),
]


def top_level_keys(kind: str) -> set[str]:
    return set(bundled_schema(kind)["properties"])


@pytest.mark.parametrize(("kind", "prog"), COMMANDS)
def test_the_command_implies_the_kind_of_a_file_without_a_schema_line(tmp_path, kind, prog):
    """`max_steps = 3` fits every kind (validate-config cannot tell which); each command checks
    it as its own kind, as the reference's commands do."""
    path = tmp_path / "plain.toml"
    path.write_text("max_steps = 3\n")
    out, err, calls = io.StringIO(), io.StringIO(), []
    code = run_entrypoint(kind, prog, [str(path), "--print-config"], out, err, calls.append)
    assert (code, err.getvalue(), calls) == (0, "", [])
    dumped = json.loads(out.getvalue())
    assert dumped["max_steps"] == 3
    assert set(dumped) <= top_level_keys(kind)  # the command's kind, and no other
    assert all(not set(dumped) <= top_level_keys(other) for other, _ in COMMANDS if other != kind)


def test_a_file_of_another_kind_is_still_checked_as_the_commands_kind():
    """The RL trainer's fake-data config given to `sft`: its data.fake is an error of an sft
    config, at its line and column (the keys do not override the command)."""
    path = str(REFERENCE / "rl-trainer" / "debug-fake.toml")
    out, err, calls = io.StringIO(), io.StringIO(), []
    code = run_entrypoint("sft", "sft", [path, "--dry-run"], out, err, calls.append)
    assert (code, out.getvalue(), calls) == (1, "", [])
    assert err.getvalue().splitlines()[0] == (
        f"{path}:8:2: error: data.fake is not a known key of [data]"
    )
    assert err.getvalue().splitlines()[-1] == f"{path}: invalid sft config (1 error, 0 warnings)"


SFT_FILES = sorted((REFERENCE / "sft").glob("*.toml"))
H200 = REFERENCE / "sft" / "advanced-qwen3-30b-a3b-h200"


@pytest.mark.parametrize(
    ("kind", "prog", "files"),
    [("sft", "sft", [path]) for path in SFT_FILES]
    + [
        ("sft", "sft", [f"{H200}-base.toml", f"{H200}-fake.toml"]),
        ("sft", "sft", [f"{H200}-base.toml", f"{H200}-math-10k.toml"]),
        ("rl", "rl-trainer", [REFERENCE / "rl-trainer" / "debug-fake.toml"]),
    ],
    ids=[p.stem for p in SFT_FILES] + ["h200-base+fake", "h200-base+math-10k", "rl-trainer"],
)
def test_a_reference_file_dry_runs_with_its_command(kind, prog, files):
    """`sft @ FILE --dry-run`, as the reference's users run them (composed runs too)."""
    argv = [token for path in files for token in ("@", str(path))] + ["--dry-run"]
    out, err, calls = io.StringIO(), io.StringIO(), []
    code = run_entrypoint(kind, prog, argv, out, err, calls.append)
    assert (code, calls) == (0, []), err.getvalue()
    assert set(json.loads(out.getvalue())) <= top_level_keys(kind)
