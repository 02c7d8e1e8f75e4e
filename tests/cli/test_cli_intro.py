"""A CLI that introduces itself (issue 37): a short --help with examples and the sections (every
setting one flag away), flag typos answered in the spelling typed and with the table's keys,
command names rather than config kinds in errors, one meaning per spelling of --dry-run, and
a bare command that answers with its usage instead of training the defaults."""

from __future__ import annotations

import io
import json

import pytest
from cli_support import ROOT, run_cli

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.config.schema_info import schema_info

COMMANDS = [
    ("sft", "sft"),
    ("rl_run", "rl"),
    ("rl", "rl-trainer"),
    ("orchestrator", "orchestrator"),
]
TINY_SFT = str(ROOT / "configs/sft/tiny.toml")
RL_DEMO = str(ROOT / "configs/rl/demo.toml")


def launch(kind: str, prog: str, *argv: str):
    calls: list = []
    out, err = io.StringIO(), io.StringIO()
    code = run_entrypoint(kind, prog, list(argv), out, err, calls.append)  # type: ignore[arg-type]
    return code, calls, out.getvalue(), err.getvalue()


def tables(kind: str) -> list[str]:
    info = schema_info(kind)
    return [p[0] for p, key in info.keys.items() if len(p) == 1 and key.is_table]


# --- 1. a short --help; every setting one flag away -------------------------------------------


@pytest.mark.parametrize(("kind", "prog"), COMMANDS)
def test_help_fits_on_one_screen_with_examples_sections_and_the_full_listing(kind, prog):
    code, calls, out, err = launch(kind, prog, "--help")
    assert (code, calls, err) == (0, [], "")
    lines = out.splitlines()
    assert len(lines) <= 40, out
    assert (
        lines[0]
        == f"usage: {prog} FILE ... [--key VALUE ...] [--print-config [--format json|toml]]"
    )
    examples = lines[lines.index("examples:") + 1 : lines.index("options:") - 1]
    assert len([line for line in examples if line.startswith(f"  {prog} ")]) == 3
    sections = out.split(f"sections ({prog} --help SECTION lists one):\n", 1)[1]
    listed = sections.split("  top-level settings:", 1)[0]
    assert [name.strip() for name in listed.replace("\n", " ").split(",")] == tables(kind)
    assert out.endswith(
        f"every setting: {prog} --help-all\nthe config reference: docs/reference/{prog}.md\n"
    )
    assert "--model.name" not in out  # the settings themselves are one flag away


def test_sft_help_text() -> None:
    _, _, out, _ = launch("sft", "sft", "--help")
    assert (
        "\nexamples:\n"
        + (
            "  sft configs/sft/tiny.toml\n"
            "      train (two layers, synthetic tokens, on the CPU)\n"
            "  sft configs/sft/tiny.toml --max-steps 20 --optim.lr 3e-4\n"
            "      override two settings\n"
            "  sft configs/sft/tiny.toml --print-config --format toml\n"
            "      the resolved config\n"
        )
        in out
    )
    assert "  -h, --help [SECTION]  this help; with SECTION, that section's settings\n" in out
    assert "  --help-all            every setting, with its description and default\n" in out


def test_help_all_and_help_section_list_the_settings() -> None:
    code, _, out, _ = launch("sft", "sft", "--help-all")
    assert code == 0 and len(out.splitlines()) > 400
    assert "  --model.name\n" in out and "settings (--key VALUE; defaults in parentheses):" in out
    code, _, out, _ = launch("rl_run", "rl", "--help", "trainer.optim")
    assert code == 0 and out.startswith("settings under trainer.optim (--key VALUE;")
    assert "--trainer.optim.lr" in out and "--model.name" not in out
    code, _, out, err = launch("sft", "sft", "--help", "all")  # one spelling: --help-all
    assert (code, out) == (2, "")
    assert err.endswith("sft: error: every setting is listed by --help-all: sft --help-all\n")


# --- 2. flag typos: the spelling typed, the table's keys ---------------------------------------


@pytest.mark.parametrize(
    ("flag", "fix"),
    [
        ("--max-step", "did you mean --max-steps?"),
        ("--max_step", "did you mean --max_steps?"),
        ("--no-max-step", "did you mean --no-max-steps?"),
        ("--optim.weight-decy", "did you mean --optim.weight-decay?"),
        ("--optim.weight_decy", "did you mean --optim.weight_decay?"),
        ("--lr", "did you mean --optim.lr?"),
    ],
)
def test_a_mistyped_flag_is_answered_in_the_spelling_typed(flag: str, fix: str) -> None:
    value = [] if flag.startswith("--no-") else ["3"]
    code, calls, _, err = launch("sft", "sft", TINY_SFT, flag, *value)
    assert (code, calls) == (1, [])
    assert f"\n    fix: {fix}\n" in err, err


def test_a_mistyped_key_of_a_table_lists_the_tables_keys_as_a_file_typo_does(tmp_path) -> None:
    code, _, _, err = launch("sft", "sft", TINY_SFT, "--optim.learning-rate", "3e-4")
    assert code == 1
    assert err.splitlines()[:2] == [
        "--optim.learning-rate: error: optim.learning_rate is not a known setting",
        "    fix: [optim] takes: lr, weight-decay, max-norm, type, betas1, betas2 "
        "(--optim.KEY VALUE)",
    ]
    _, _, _, err = launch("sft", "sft", TINY_SFT, "--optim.learning_rate", "3e-4")
    snake = "[optim] takes: lr, weight_decay, max_norm, type, betas1, betas2 (--optim.KEY VALUE)"
    assert f"    fix: {snake}\n" in err
    path = tmp_path / "typo.toml"  # the same typo in a file: the same keys
    path.write_text("[optim]\nlearning_rate = 3e-4\n")
    result = run_cli("--kind", "sft", str(path))
    assert "[optim] takes: lr, weight_decay, max_norm, type, betas1, betas2\n" in result.stdout


def test_a_union_tables_keys_are_those_of_the_variant_chosen() -> None:
    _, _, _, err = launch("sft", "sft", TINY_SFT, "--optim.type", "sgd", "--optim.zzzz", "1")
    assert "    fix: [optim] takes: lr, weight-decay, max-norm, type, nesterov, momentum (" in err


# --- 3. command names, not kinds -----------------------------------------------------------


def test_a_file_for_another_command_names_that_command() -> None:
    code, calls, _, err = launch("sft", "sft", RL_DEMO)
    assert (code, calls) == (2, [])
    assert err == (
        f"sft: {RL_DEMO}:1:1: error: its #:schema line is for rl configs (rl.json), but sft "
        "reads sft configs\n"
        f"    fix: use rl: rl {RL_DEMO}; or point the #:schema line at the sft schema "
        "(sft_trainer.json)\n"
    )
    _, _, _, err = launch("rl_run", "rl", str(ROOT / "configs/rl/tiny.toml"))
    assert "its #:schema line is for rl-trainer configs (rl_trainer.json), but rl reads" in err
    assert "fix: use rl-trainer: rl-trainer " in err


@pytest.mark.parametrize(("kind", "prog"), COMMANDS)
def test_help_and_verdicts_name_the_command(kind, prog) -> None:
    for flag in ("--help", "--help-all"):
        _, _, out, _ = launch(kind, prog, flag)
        assert " a orchestrator" not in out and "rl_run" not in out
    code, _, _, err = launch(kind, prog, "--help", "optimm")
    assert code == 2 and f"optimm is not a setting or table of {prog} configs" in err


def test_an_invalid_rl_config_is_called_an_rl_config() -> None:
    code, _, _, err = launch("rl_run", "rl", RL_DEMO, "--max-steps", "0")
    assert code == 1
    assert err.splitlines()[-1] == f"{RL_DEMO}: invalid rl config (1 error, 0 warnings)"


# --- 4. --dry-run and --dry_run: one meaning --------------------------------------------------


@pytest.mark.parametrize("flag", ["--dry-run", "--dry_run"])
def test_both_spellings_of_dry_run_are_rls_dry_run(flag: str) -> None:
    """rl's dry_run writes both processes' configs (its launch does): both spellings hand it
    the config with dry_run on and print nothing themselves."""
    code, calls, out, err = launch("rl_run", "rl", RL_DEMO, flag)
    assert (code, out, err) == (0, "", "")
    [config] = calls
    assert config.dry_run is True


@pytest.mark.parametrize(("kind", "prog"), [("sft", "sft"), ("rl", "rl-trainer")])
@pytest.mark.parametrize("flag", ["--dry-run", "--dry_run"])
def test_both_spellings_of_dry_run_print_the_config_elsewhere(kind, prog, flag) -> None:
    config = TINY_SFT if prog == "sft" else str(ROOT / "configs/rl/tiny.toml")
    code, calls, out, err = launch(kind, prog, config, flag)
    assert (code, calls) == (0, []), err
    printed = json.loads(launch(kind, prog, config, "--print-config")[2])
    assert json.loads(out) == {**printed, **({"dry_run": True} if "dry_run" in printed else {})}


def test_print_config_prints_rls_config_and_starts_nothing() -> None:
    code, calls, out, err = launch("rl_run", "rl", RL_DEMO, "--print-config")
    assert (code, calls) == (0, []), err
    assert json.loads(out)["dry_run"] is False


# --- 5. a bare command: its usage, not a download ------------------------------------------


@pytest.mark.parametrize(("kind", "prog"), COMMANDS)
def test_a_bare_command_answers_with_its_usage(kind, prog) -> None:
    code, calls, out, err = launch(kind, prog)
    assert (code, calls, out) == (2, [], "")
    assert err.startswith(f"usage: {prog} FILE ...") and "\nexamples:\n" in err
    assert err.endswith(
        f"\n{prog}: error: no config: give a file ({prog} FILE.toml), - to read one from stdin, "
        f"or settings (`{prog} --print-config` prints the defaults)\n"
    )


def test_settings_alone_are_a_config() -> None:
    """A config given entirely as --key VALUE runs (the tests start sft that way)."""
    code, calls, _, err = launch("sft", "sft", "--model.name", "builtin:tiny-qwen3",
                                 "--max-steps", "3")  # fmt: skip
    assert code == 0 and len(calls) == 1, err


def test_print_config_without_a_file_prints_the_defaults() -> None:
    code, calls, out, _ = launch("sft", "sft", "--print-config")
    assert (code, calls) == (0, []) and json.loads(out)["max_steps"] is None


def test_format_toml_is_for_print_config_not_a_dry_run() -> None:
    code, calls, out, err = launch("rl_run", "rl", RL_DEMO, "--dry-run", "--format", "toml")
    assert (code, calls, out) == (2, [], "")
    assert err.endswith(
        "rl: error: the dry run writes both processes' configs in JSON: drop --format toml, or "
        "print the config with --print-config\n"
    )
