"""Nothing from a config runs as a command of the job script [slurm] writes: every value the
script passes to a command is quoted, and what it holds unquoted (an `#SBATCH` line, a comment)
cannot end its line; a dry run refuses what submitting would, writing nothing. Rendered here,
without a cluster; validation's side (the config's values, at their line) is
tests/validators/test_job_path_rules.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from slurm_runs import RL, RL_TWO_NODES, SFT, write_config

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.rl_run.main import main as rl_main
from trainspec.trainers.rl_run.slurm_job import rl_job
from trainspec.trainers.sft.main import main as sft_main
from trainspec.trainers.sft.slurm_job import sft_job
from trainspec.trainers.slurm.submit import job_script

INJECTED = "A; touch pwned; B"  # a name that, exported unquoted, runs `touch pwned`


@pytest.fixture(autouse=True)
def no_gpus(monkeypatch):
    """sinfo's answer: the partition's nodes declare no GPU."""
    monkeypatch.setattr("trainspec.trainers.slurm.submit.partition_gpus", lambda _: False)


@pytest.fixture(autouse=True)
def sbatch(tmp_path_factory, monkeypatch):
    """An sbatch on PATH that submits nothing and leaves a mark: what is refused never gets
    there (the tests that submit check the mark is absent)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    mark = bin_dir / "submitted"
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\ntouch "{mark}"\necho 1\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    yield
    assert not mark.exists(), "sbatch was called"


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_an_env_name_the_script_exports_runs_no_command(tmp_path):
    """Past validation (which refuses the name at its line), the exports stay quoted; they live
    in a file the script sources (its owner's alone), so the script holds no value."""
    good = "a b'$HOME\"`x`"
    changes = {"deployment": RL_TWO_NODES, "inference": {}, "env_vars": {"GOOD": good}}
    config = load("rl_run", [write_config(tmp_path, RL, changes, {})]).config
    config.env_vars[INJECTED] = "1"
    job = rl_job(config, False)
    _, text = job_script(config, job, False)
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0
    (env_file,) = [path for path in job.configs if path.name == "job.env"]
    assert f"\n. {env_file} " in text and "GOOD" not in text and "pwned" not in text
    exports = job.configs[env_file].splitlines()
    assert exports == [
        "export 'GOOD=a b'\"'\"'$HOME\"`x`'",  # one word, quoted
        f"export '{INJECTED}=1'",  # was: export A; touch pwned; B='1'
    ]
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    result = bash("\n".join(exports) + '\nprintf %s "$GOOD"', sandbox)
    assert result.stdout == good  # the value, exactly
    assert "not a valid identifier" in result.stderr  # the name, one word: refused by export
    assert list(sandbox.iterdir()) == []  # and nothing ran


def test_a_control_character_the_script_would_hold_unquoted_is_refused(tmp_path):
    """What no config value can bring past validation (the run directory's path is made
    absolute from where the command runs) the rendering refuses all the same."""
    config = load("sft", [write_config(tmp_path, SFT, {}, {})]).config
    job = sft_job(config)
    job.run_dir = tmp_path / "run\ntouch pwned"
    with pytest.raises(SetupError) as caught:
        job_script(config, job, False)
    assert caught.value.path == "slurm"
    assert caught.value.problem.startswith(
        f"the job script would hold {str(job.run_dir / 'sft.sbatch')!r} unquoted, and a "
        "newline in it would end its line (an `#SBATCH` line, a comment): the rest would run "
        "as a command"
    )


@pytest.mark.parametrize(("directory", "what"), [("proj dir", "a space"), ("proj\nx", "a newline")])
def test_a_run_directory_that_cannot_go_on_the_sbatch_output_line_is_refused(
    directory, what, tmp_path, monkeypatch, capsys
):
    """project_dir "." and a relative output_dir: the job log's path is made from where the
    command runs. Submitting and a dry run refuse it alike, and write nothing."""
    project = tmp_path / directory
    project.mkdir()
    monkeypatch.chdir(project)
    config = write_config(tmp_path, SFT, {"output_dir": "out", "run": {"name": "r"}}, {})
    for args in ([], ["--dry-run"]):
        assert sft_main([str(config), *args]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert (
            f":2:14: output_dir: error: the run directory {str(project / 'out' / 'r')!r} "
            f"holds {what}: "
            "the job log's path in it goes on the job script's `#SBATCH --output=` line, which "
            "cannot be quoted\n"
        ) in err, err
    assert sorted(path.name for path in tmp_path.rglob("*")) == [directory, "run.toml"]


def test_validation_refuses_an_injected_name_before_anything_is_written(tmp_path, capsys):
    changes = {"deployment": RL_TWO_NODES, "inference": {}, "env_vars": {INJECTED: "1"}}
    config = write_config(tmp_path, RL, changes, {})
    assert rl_main([str(config), "--dry-run"]) != 0
    out, err = capsys.readouterr()
    line = config.read_text().splitlines().index(f'"{INJECTED}" = "1"') + 1
    assert f'{config}:{line}:1: error: env_vars."{INJECTED}" cannot be exported' in out + err
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["run.toml"]


def test_a_dry_run_with_clean_refuses_a_directory_no_run_marks(tmp_path, capsys):
    """clean = true empties the run directory at submission: one that trainspec's identity
    file does not mark as a run is refused, by a dry run too, and keeps its files."""
    config = write_config(tmp_path, SFT, {"run": {"name": "mine"}, "clean": True}, {})
    mine = tmp_path / "out" / "mine"
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("years of work\n")
    for args in ([], ["--dry-run"]):
        assert sft_main([str(config), *args]) == 1
        out, err = capsys.readouterr()
        assert out == "" and f": clean: error: = true would delete everything in {mine} " in err
        assert sorted(path.name for path in mine.iterdir()) == ["thesis.tex"]
    (mine / "identity.json").write_text(json.dumps({"kind": "sft"}))  # a run's directory
    assert sft_main([str(config), "--dry-run"]) == 0
    assert (mine / "thesis.tex").exists() and (mine / "sft.sbatch").is_file()  # dry: kept
