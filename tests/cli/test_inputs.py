"""Each input is read once: a config piped in (`-`, /dev/stdin) is checked whole, however long,
and its kind comes from the text that was read. The reference's command lines: `@ file.toml`
and section files (`--model @ model.toml`)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import ROOT, run_cli

from trainspec.cli.entrypoint import run_entrypoint
from trainspec.config import sources

VALIDATE = Path(sys.executable).with_name("validate-config")
SFT = Path(sys.executable).with_name("sft")
RL_HEAD = "#:schema ../generated/schemas/rl_trainer.json\n"
# Over 4 KiB of comments before the one bad setting: what a 4 KiB sniff once swallowed.
PADDING = "".join(f"# a comment line of padding, number {n:04d} ..........\n" for n in range(120))
LONG_BAD = RL_HEAD + PADDING + "max_steps = 0\n"
BAD_LINE = LONG_BAD.count("\n")

pytestmark = pytest.mark.skipif(not VALIDATE.exists(), reason=f"{VALIDATE} is not installed")


def piped(argv: list[str], text: str, script: Path = VALIDATE) -> subprocess.CompletedProcess:
    """`printf text | script argv...`, through a real pipe."""
    result = subprocess.run(
        [str(script), *argv], input=text, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_long_piped_config_is_checked_whole(name: str) -> None:
    assert len(LONG_BAD.encode()) > 4096
    result = piped([name], LONG_BAD)
    assert result.returncode == 1, result.stdout + result.stderr
    shown = "<stdin>" if name == "-" else name
    assert f"{shown}:{BAD_LINE}:13: error: max_steps should be at least 1" in result.stdout


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_small_piped_config_is_not_empty(name: str) -> None:
    result = piped([name, "--format", "json"], RL_HEAD + "max_steps = 7\n")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["kind"] == "rl" and report["config"]["max_steps"] == 7


def test_stdin_with_kind_and_overrides() -> None:
    result = piped(["--kind", "sft", "-", "--max-steps", "9", "--print"], "[optim]\nlr = 2e-4\n")
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)
    assert (config["max_steps"], config["optim"]["lr"]) == (9, 2e-4)


def test_stdin_without_a_kind_is_a_usage_error() -> None:
    result = piped(["-"], "max_steps = 3\n")  # a key every kind has
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].startswith(
        "validate-config: error: cannot tell which kind of config <stdin> is: every key it sets "
        "(max_steps) is in rl, sft, orchestrator and rl_run configs. Pass --kind rl, --kind sft, "
    )


def test_stdin_without_a_kind_is_told_by_its_keys() -> None:
    """The kind is told from the text that was read: the pipe is not read a second time."""
    result = piped(["-", "--format", "json"], "max_steps = 3\n[data.fake]\nbatch_size = 2\n")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["kind"] == "rl"
    assert result.stderr == (
        "validate-config: no #:schema line in <stdin>: checking it as an rl config (what "
        "`rl-trainer` reads), the only kind that has data.fake; pass --kind to choose another "
        "kind\n"
    )


def test_stdin_for_the_training_entrypoint() -> None:
    result = piped(["-", "--dry-run"], (ROOT / "configs/sft/tiny.toml").read_text(), SFT)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["max_steps"] == 4


def test_every_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kind is sniffed from what read_file returned: no second open of any input."""
    base = tmp_path / "base.toml"
    base.write_text(RL_HEAD + "max_steps = 3\n")
    lora = tmp_path / "lora.toml"
    lora.write_text("rank = 4\n")
    opened: list[str] = []
    real = sources.read_file

    def counting(path):
        opened.append(str(path))
        return real(path)

    monkeypatch.setattr("trainspec.cli.inputs.read_file", counting)
    real_open = open

    def no_second_open(path, *args, **kwargs):
        assert str(path) not in (str(base), str(lora)), f"{path} opened outside read_file"
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_second_open)
    result = run_cli(str(base), "--optim.lr", "1e-5", "--model.lora", "@", str(lora), "--explain")
    assert result.code == 0, result.stdout + result.stderr
    assert sorted(opened) == sorted([str(base), str(lora)])


def test_stdin_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(LONG_BAD.encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    result = run_cli("-", "--format", "json")
    assert result.code == 1
    [error] = json.loads(result.stdout)["errors"]
    assert (error["file"], error["line"], error["path"]) == ("<stdin>", BAD_LINE, "max_steps")


# ------------------------------------------------------------------ the reference's lines


@pytest.mark.parametrize("form", [["@", "FILE"], ["@FILE"]])
def test_at_file(tmp_path: Path, form: list[str]) -> None:
    path = tmp_path / "run.toml"
    path.write_text(RL_HEAD + "max_steps = 0\n")
    result = run_cli(*[token.replace("FILE", str(path)) for token in form])
    assert result.code == 1
    assert f"{path}:2:13: error: max_steps" in result.stdout


@pytest.mark.parametrize("form", [["--model", "@", "FILE"], ["--model", "@FILE"]])
def test_a_section_file_becomes_its_table(tmp_path: Path, form: list[str]) -> None:
    model = tmp_path / "model.toml"
    model.write_text('name = "builtin:tiny-qwen3"\n\n[lora]\nrank = 4\nalphaa = 8\n')
    argv = [token.replace("FILE", str(model)) for token in form]
    result = run_cli(str(ROOT / "configs/rl/tiny.toml"), *argv, "--format", "json")
    assert result.code == 1, result.stdout + result.stderr
    [error] = json.loads(result.stdout)["errors"]
    assert (error["path"], error["file"], error["line"], error["column"]) == (
        "model.lora.alphaa",
        str(model),
        5,
        1,
    )
    model.write_text('name = "builtin:tiny-qwen3"\n\n[lora]\nrank = 4\n')
    result = run_cli(str(ROOT / "configs/rl/tiny.toml"), *argv, "--print")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["model"]["lora"]["rank"] == 4


def test_section_files_come_after_files_and_before_flags(tmp_path: Path) -> None:
    optim = tmp_path / "optim.toml"
    optim.write_text("lr = 2e-5\nbetas1 = 0.8\n")
    tiny = str(ROOT / "configs/rl/tiny.toml")  # sets optim.lr = 1e-4
    result = run_cli("--optim", "@", str(optim), tiny, "--optim.betas1", "0.7", "--print")
    assert result.code == 0, result.stderr
    optim_config = json.loads(result.stdout)["optim"]
    assert (optim_config["lr"], optim_config["betas1"]) == (2e-5, 0.7)


def test_a_section_file_with_its_own_header_is_explained(tmp_path: Path) -> None:
    model = tmp_path / "model.toml"
    model.write_text('[model]\nname = "x"\n')
    result = run_cli(str(ROOT / "configs/rl/tiny.toml"), "--model", "@", str(model))
    assert result.code == 1
    assert f"{model}:1:2: error: model.model is not a known key" in result.stdout
    assert "without the [model] header" in result.stdout


def test_a_section_file_for_a_setting_that_is_not_a_table(tmp_path: Path) -> None:
    result = run_cli(str(ROOT / "configs/rl/tiny.toml"), "--max-steps", "@", "steps.toml")
    assert result.code == 2
    assert "max_steps is not a table of rl configs" in result.stderr


def test_a_section_file_that_cannot_be_read(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    result = run_cli(str(ROOT / "configs/rl/tiny.toml"), "--model", "@", str(missing))
    assert result.code == 2
    assert result.stderr.startswith(f"{missing}: no such file or directory")


def test_the_entrypoint_takes_section_files(tmp_path: Path) -> None:
    optim = tmp_path / "optim.toml"
    optim.write_text("lr = 3e-3\n")
    calls: list = []
    out, err = io.StringIO(), io.StringIO()
    argv = ["@", str(ROOT / "configs/sft/tiny.toml"), "--optim", "@", str(optim)]
    assert run_entrypoint("sft", "sft", argv, out, err, calls.append) == 0, err.getvalue()
    assert calls[0].optim.lr == 3e-3


def test_files_of_two_kinds_do_not_merge(tmp_path: Path) -> None:
    result = run_cli(
        str(ROOT / "configs/rl/tiny.toml"), str(ROOT / "configs/sft/tiny.toml"), "--format", "json"
    )
    assert result.code == 2
    [error] = json.loads(result.stdout)["errors"]
    assert error["file"] == str(ROOT / "configs/sft/tiny.toml") and error["line"] == 1
    assert "is for sft configs, but" in error["message"] and error["category"] == "usage"


def test_the_entrypoint_names_a_config_of_another_kind() -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = [str(ROOT / "configs/rl/tiny.toml")]
    assert run_entrypoint("sft", "sft", argv, out, err, lambda config: 0) == 2
    assert (
        "its #:schema line is for rl-trainer configs (rl_trainer.json), but sft reads sft configs"
        in err.getvalue()
    )


COMBINED = "[trainer]\nmax_steps = 5\n\n[orchestrator]\nmax_steps = 5\n"


def test_a_combined_file_without_a_schema_line_is_the_rl_commands(tmp_path: Path) -> None:
    """The reference's rl.toml files name no schema: their [trainer] / [orchestrator] tables
    say they are the `rl` command's combined config (kind rl_run)."""
    path = tmp_path / "rl.toml"
    path.write_text(COMBINED)
    result = run_cli(str(path))
    assert result.code == 0 and "valid rl_run config" in result.stdout, result
    path.write_text(COMBINED.replace("max_steps = 5\n\n[orch", "max_steps = 0\n\n[orch"))
    result = run_cli(str(path))
    assert result.code == 1 and "trainer.max_steps" in result.stdout, result


def test_kind_rl_on_a_combined_file_says_which_kind_to_use(tmp_path: Path) -> None:
    path = tmp_path / "rl.toml"
    path.write_text(COMBINED)
    result = run_cli("--kind", "rl", str(path))
    assert result.code == 2
    assert "combined config of the `rl` command" in result.stderr
    assert "--kind rl_run" in result.stderr and "not a known key" not in result.stderr
    trainer_only = tmp_path / "trainer.toml"
    trainer_only.write_text("max_steps = 5\n")
    assert run_cli("--kind", "rl", str(trainer_only)).code == 0
