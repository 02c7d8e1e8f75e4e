"""migrate-config, the command: --check for CI, idempotence, conflicts, what validate-config and
the loader think of the result, kinds, usage and errors (each with its exit code, never a
traceback). Rewriting is in test_migrate_config_rewrite.py, file safety in
test_migrate_config_files.py and test_migrate_config_changed.py."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from migrate_support import BODY, DIRECTIVE, NEW, OLD, ROOT, call, read, validate, write

from trainspec.config import load

# --- --check, idempotence, conflicts -----------------------------------------------------------


def test_check_reports_and_changes_nothing(tmp_path):
    path = write(tmp_path, OLD)
    code, out, _ = call(str(path), "--check")
    assert code == 1
    assert read(path) == OLD
    line = OLD.splitlines().index("num_eval_gpus = 1") + 1
    assert out.splitlines() == [
        f"{path}:{line}: would rename deployment.num_eval_gpus -> deployment.num_infer_gpus",
        "migrate-config: would rename 1 key in 1 of 1 file; run migrate-config without --check "
        "to apply",
    ]


def test_check_passes_on_a_migrated_file(tmp_path):
    path = write(tmp_path, NEW)
    assert call("--check", str(path)) == (0, "migrate-config: nothing to rename in 1 file\n", "")
    assert read(path) == NEW


def test_migrating_twice_changes_nothing_the_second_time(tmp_path):
    path = write(tmp_path, OLD)
    assert call(str(path))[0] == 0
    assert read(path) == NEW
    assert call(str(path)) == (0, "migrate-config: nothing to rename in 1 file\n", "")
    assert read(path) == NEW
    assert call("--check", str(path))[0] == 0


@pytest.mark.parametrize("check", [False, True])
def test_old_and_new_key_together_is_a_conflict(tmp_path, check):
    text = OLD + "num_infer_gpus = 1\n"
    path = write(tmp_path, text)
    code, out, _ = call(str(path), *(["--check"] if check else []))
    assert code == 1
    assert read(path) == text
    lines = text.splitlines()
    old, new = lines.index("num_eval_gpus = 1") + 1, lines.index("num_infer_gpus = 1") + 1
    first = out.splitlines()[0]
    assert first.startswith(f"{path}:{old}: conflict: deployment.num_eval_gpus (line {old})")
    assert f"deployment.num_infer_gpus, which is already set (line {new})" in first
    assert "left unchanged" in first
    assert "1 file with conflicts left unchanged" in out


def test_other_files_are_still_migrated_when_one_fails(tmp_path):
    good = write(tmp_path, OLD, "good.toml")
    clash = write(tmp_path, OLD + "num_infer_gpus = 1\n", "clash.toml")
    code, out, err = call(str(clash), str(tmp_path / "missing.toml"), str(good))
    assert code == 2  # the worst outcome wins
    assert read(good) == NEW and "num_eval_gpus" in read(clash)
    assert f"{tmp_path / 'missing.toml'}: no such file or directory" in err
    assert out.splitlines()[-1] == (
        "migrate-config: renamed 1 key in 1 of 3 files; 1 file with conflicts left unchanged; "
        "1 file not migrated (see the errors above)"
    )


# --- what validate-config and the loader think of the result -----------------------------------


@pytest.mark.parametrize("layout", ["header", "dotted", "inline"])
def test_validate_config_accepts_the_migrated_file(tmp_path, layout):
    deployment = {
        "header": "\n[deployment]\ngpus_per_node = 2\nnum_eval_gpus = 1\n",
        "dotted": "deployment.gpus_per_node = 2\ndeployment.num_eval_gpus = 1\n",
        "inline": "deployment = { gpus_per_node = 2, num_eval_gpus = 1 }\n",
    }[layout]
    text = (
        DIRECTIVE + "max_steps = 4\n" + deployment + BODY
        if layout != "header"
        else DIRECTIVE + "max_steps = 4\n" + BODY + deployment
    )
    path = write(tmp_path, text)
    code, report = validate(path)
    assert code == 1 and "deployment.num_eval_gpus was renamed to deployment.num_infer_gpus" in (
        report
    )
    assert call(str(path))[0] == 0
    assert validate(path)[0] == 0
    resolved = load("sft", [path])
    assert resolved.config.deployment.num_infer_gpus == 1
    assert tomllib.loads(read(path))["deployment"] == {"gpus_per_node": 2, "num_infer_gpus": 1}


def test_the_shipped_configs_need_no_migration():
    files = sorted(str(p) for p in (ROOT / "configs").rglob("*.toml"))
    code, out, _ = call("--check", *files)
    assert code == 0, out


# --- kinds, usage and errors -------------------------------------------------------------------


def test_kind_from_the_flag_when_the_file_has_no_schema_line(tmp_path):
    path = write(tmp_path, "[deployment]\nnum_eval_gpus = 1\n")
    code, _, err = call(str(path))
    assert code == 2 and read(path) == "[deployment]\nnum_eval_gpus = 1\n"
    assert (
        f"{path}: cannot tell which kind" in err and "--kind (rl, sft" in err and "#:schema" in err
    )
    assert call("--kind", "sft", str(path))[0] == 0
    assert read(path) == "[deployment]\nnum_infer_gpus = 1\n"


def test_rl_configs_have_no_deployment_renames(tmp_path):
    text = "#:schema ../generated/schemas/rl_trainer.json\n[deployment]\nnum_eval_gpus = 1\n"
    path = write(tmp_path, text)
    assert call("--check", str(path))[0] == 0  # not an rl key at all: validate-config's job


def test_missing_file(tmp_path):
    code, out, err = call(str(tmp_path / "nope.toml"))
    assert code == 2
    assert err == f"{tmp_path / 'nope.toml'}: no such file or directory\n"
    assert "not migrated" in out


def test_directory(tmp_path):
    code, _, err = call(str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_broken_toml_names_line_and_column(tmp_path):
    text = DIRECTIVE + "[deployment]\nnum_eval_gpus = = 1\n"
    path = write(tmp_path, text)
    for check in ([], ["--check"]):
        code, _, err = call(*check, str(path))
        assert code == 2
        assert err.startswith(f"{path}:3:17: is not valid TOML"), err
    assert read(path) == text


def test_not_utf8(tmp_path):
    path = tmp_path / "run.toml"
    path.write_bytes(DIRECTIVE.encode() + b"[deployment]\nnum_eval_gpus = 1 # \xff\n")
    code, _, err = call(str(path))
    assert code == 2 and f"{path}:3:" in err and "not UTF-8" in err


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "give at least one config FILE"),
        (["--kind", "dpo", "x.toml"], "invalid choice"),
        (["--frobnicate", "x.toml"], "unrecognized arguments"),
    ],
)
def test_usage_errors(argv, message):
    code, out, err = call(*argv)
    assert code == 2 and out == ""
    assert err.startswith("usage: migrate-config FILE") and message in err


def test_help():
    code, out, err = call("--help")
    assert code == 0 and err == ""
    assert "--check" in out and "--kind" in out
    epilog = " ".join(out.split())  # argparse wraps it
    assert "1 a conflict or a file that changed while it was being rewritten" in epilog


@pytest.mark.parametrize("how", ["module", "console script"])
def test_the_module_runs_as_a_program(tmp_path, how):
    path = write(tmp_path, OLD)
    program = {
        "module": [sys.executable, "-m", "trainspec.cli.migrate_config"],
        "console script": [str(Path(sys.executable).with_name("migrate-config"))],
    }[how]
    command = [*program, "--check", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "would rename deployment.num_eval_gpus" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_rewriting_names_are_still_importable_from_the_command_module():
    # They lived in migrate_config.py before migrate_rewrite.py; code importing them from there
    # keeps working.
    from trainspec.cli import migrate_config, migrate_rewrite

    for name in ("CannotRewrite", "Conflict", "Rename", "RenameTable", "migrate_text", "plan"):
        assert getattr(migrate_config, name) is getattr(migrate_rewrite, name)
    assert {"rewrite", "renames_for", "run", "main"} <= set(migrate_config.__all__)
