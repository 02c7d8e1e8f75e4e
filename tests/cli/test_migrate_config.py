"""migrate-config: renames from the schema, applied in place with everything else kept byte for
byte; --check for CI; conflicts and errors leave files alone and never show a traceback."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from trainspec.cli import validate_config
from trainspec.cli.migrate_config import CannotRewrite, Rules, migrate_text, rules_for, run
from trainspec.config import load

ROOT = Path(__file__).resolve().parents[2]
DIRECTIVE = "#:schema ../generated/schemas/sft_trainer.json\n"
# What every test file needs besides [deployment] to be a valid SFT config.
BODY = """
[model]
name = "Qwen/Qwen3-0.6B"
seq_len = 64

[data]
type = "fake"
batch_size = 4
micro_batch_size = 2
seq_len = 64
"""


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    for stream in (out.getvalue(), err.getvalue()):
        assert "Traceback" not in stream and "internal error" not in stream, stream
    return code, out.getvalue(), err.getvalue()


def validate(path: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = validate_config.run([str(path)], out, err)
    return code, out.getvalue() + err.getvalue()


def write(tmp_path: Path, text: str, name: str = "run.toml") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


# --- the three ways to write a table ---------------------------------------------------------


def test_renames_under_a_table_header_keeping_comments_blank_lines_and_order(tmp_path):
    before = (
        DIRECTIVE
        + "# SFT smoke run.\n"
        + "max_steps = 4\n"
        + BODY
        + "\n"
        + "# Where it runs.\n"
        + "[deployment]   # one node\n"
        + "gpus_per_node = 2\n"
        + "\n"
        + "# the online-eval server\n"
        + "num_eval_gpus   =  1    # was 0 before\n"
        + "num_train_gpus = 1\n"
        + "\n"
    )
    expected = (
        DIRECTIVE
        + "# SFT smoke run.\n"
        + "max_steps = 4\n"
        + BODY
        + "\n"
        + "# Where it runs.\n"
        + "[deployment]   # one node\n"
        + "gpus_per_node = 2\n"
        + "\n"
        + "# the online-eval server\n"
        + "num_infer_gpus   =  1    # was 0 before\n"
        + "num_train_gpus = 1\n"
        + "\n"
    )
    path = write(tmp_path, before)
    code, out, err = call(str(path))
    assert (code, err) == (0, "")
    assert read(path) == expected
    line = expected.splitlines().index("num_infer_gpus   =  1    # was 0 before") + 1
    assert out == (
        f"{path}:{line}: deployment.num_eval_gpus -> deployment.num_infer_gpus\n"
        "migrate-config: renamed 1 key in 1 of 1 file\n"
    )


def test_renames_a_dotted_key_at_the_top_level(tmp_path):
    before = (
        DIRECTIVE
        + "max_steps = 4\n"
        + "deployment.gpus_per_node = 2  # dotted\n"
        + "\n"
        + "deployment.num_eval_gpus = 1  # eval server\n"
        + "# trailing note\n"
        + BODY
    )
    expected = (
        DIRECTIVE
        + "max_steps = 4\n"
        + "deployment.gpus_per_node = 2  # dotted\n"
        + "\n"
        + "deployment.num_infer_gpus = 1  # eval server\n"
        + "# trailing note\n"
        + BODY
    )
    path = write(tmp_path, before)
    code, out, _ = call(str(path))
    assert code == 0
    assert read(path) == expected
    assert out.startswith(f"{path}:5: deployment.num_eval_gpus -> deployment.num_infer_gpus\n")


def test_renames_inside_an_inline_table(tmp_path):
    before = (
        DIRECTIVE
        + "max_steps = 4\n"
        + "deployment = { gpus_per_node = 2,num_eval_gpus=1, num_train_gpus = 1 }  # inline\n"
        + BODY
    )
    expected = (
        DIRECTIVE
        + "max_steps = 4\n"
        + "deployment = { gpus_per_node = 2,num_infer_gpus=1, num_train_gpus = 1 }  # inline\n"
        + BODY
    )
    path = write(tmp_path, before)
    code, out, _ = call(str(path))
    assert code == 0
    assert read(path) == expected
    assert f"{path}:3: deployment.num_eval_gpus -> deployment.num_infer_gpus" in out


def test_a_quoted_key_stays_quoted(tmp_path):
    before = DIRECTIVE + BODY + '\n[deployment]\n"num_eval_gpus" = 1\n'
    path = write(tmp_path, before)
    assert call(str(path))[0] == 0
    assert read(path) == DIRECTIVE + BODY + '\n[deployment]\n"num_infer_gpus" = 1\n'


def test_windows_line_endings_are_kept(tmp_path):
    before = (DIRECTIVE + BODY + "\n[deployment]\nnum_eval_gpus = 1 # c\n").replace("\n", "\r\n")
    path = write(tmp_path, before)
    assert call(str(path))[0] == 0
    assert read(path) == before.replace("num_eval_gpus", "num_infer_gpus")


def test_renames_the_multi_node_key(tmp_path):
    deployment = (
        '\n[deployment]\ntype = "multi_node"\nnum_train_nodes = 2\n'
        "num_eval_nodes = 1  # inference\n"
    )
    path = write(tmp_path, DIRECTIVE + BODY + deployment)
    code, out, _ = call(str(path))
    assert code == 0
    assert read(path) == DIRECTIVE + BODY + deployment.replace("num_eval_nodes", "num_infer_nodes")
    assert "deployment.num_eval_nodes -> deployment.num_infer_nodes" in out
    assert validate(path)[0] == 0


def test_a_renamed_key_of_another_variant_is_left_for_validate_config(tmp_path):
    # num_eval_gpus is single_node's old name; renaming it in a multi_node table would only
    # trade one unknown key for another, so it stays and validate-config explains it.
    text = DIRECTIVE + BODY + '\n[deployment]\ntype = "multi_node"\nnum_eval_gpus = 1\n'
    path = write(tmp_path, text)
    code, out, _ = call("--check", str(path))
    assert code == 0 and read(path) == text
    assert out == "migrate-config: nothing to rename in 1 file\n"


# --- --check, idempotence, conflicts -----------------------------------------------------------

OLD = DIRECTIVE + BODY + "\n[deployment]\ngpus_per_node = 2\nnum_eval_gpus = 1\n"
NEW = OLD.replace("num_eval_gpus", "num_infer_gpus")


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
    assert f"{path}: cannot tell whether" in err and "--kind rl|sft" in err and "#:schema" in err
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


def test_permissions_are_kept(tmp_path):
    path = write(tmp_path, OLD)
    path.chmod(0o640)
    assert call(str(path))[0] == 0
    assert (path.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.toml"]  # no temporary left


def test_the_module_runs_as_a_program(tmp_path):
    path = write(tmp_path, OLD)
    command = [sys.executable, "-m", "trainspec.cli.migrate_config", "--check", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "would rename deployment.num_eval_gpus" in done.stdout
    assert "Traceback" not in done.stderr


# --- the rename map comes from the schema --------------------------------------------------------


def _declared_renames() -> set[tuple[str, str]]:
    """Every (old, new) pair an `x-trainspec-renamed` map in schema/*.json declares."""
    found: set[tuple[str, str]] = set()

    def walk(node):
        if isinstance(node, dict):
            found.update(node.get("x-trainspec-renamed", {}).items())
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for schema in (ROOT / "schema").glob("*.json"):
        walk(json.loads(schema.read_text()))
    return found


def test_every_declared_rename_is_migrated():
    derived = {
        (old, new)
        for kind in ("rl", "sft")
        for mapping in rules_for(kind).renames.values()
        for old, new in mapping.items()
    }
    declared = _declared_renames()
    assert ("num_eval_gpus", "num_infer_gpus") in declared
    assert declared <= derived
    assert rules_for("sft").renames[("deployment",)] == {
        "num_eval_gpus": "num_infer_gpus",
        "num_eval_nodes": "num_infer_nodes",
    }


# --- renames the schema may add later: deeper keys, tables, arrays of tables ---------------------


def migrate(text: str, renames: dict[tuple[str, ...], dict[str, str]]):
    return migrate_text(text, tomllib.loads(text), Rules(renames))


def test_deeper_keys_in_every_layout():
    text = (
        "# top\n"
        "a.old = 1  # t\n"
        "a . 'older' . x = 2\n"
        '"a".b = { old = 3, "old 2" = 4 }\n'
        "\n"
        "[c.d]\n"
        "old = 5\n"
    )
    renames = {
        ("a",): {"old": "new", "older": "newer"},
        ("a", "b"): {"old": "new", "old 2": "new 2"},
        ("c", "d"): {"old": "new"},
    }
    new_text, done, conflicts = migrate(text, renames)
    assert conflicts == [] and len(done) == 5
    assert new_text == (
        "# top\n"
        "a.new = 1  # t\n"
        "a . 'newer' . x = 2\n"
        '"a".b = { new = 3, "new 2" = 4 }\n'
        "\n"
        "[c.d]\n"
        "new = 5\n"
    )


def test_a_renamed_table_is_renamed_in_every_header():
    text = (
        "[sec.old]\n"
        "x = 1\n"
        "[sec.old.sub]  # c\n"
        "y = 2\n"
        "[ \"sec\" . 'old' . more ]\n"
        "z = 3\n"
        "[[sec.arr]]\n"
        "old = 1\n"
        "[[sec.arr]]\n"
        "[sec.arr.t]\n"
    )
    new_text, done, _ = migrate(text, {("sec",): {"old": "new", "arr": "array"}})
    assert [r.describe() for r in done] == ["sec.old -> sec.new", "sec.arr -> sec.array"]
    assert new_text == (
        "[sec.new]\n"
        "x = 1\n"
        "[sec.new.sub]  # c\n"
        "y = 2\n"
        "[ \"sec\" . 'new' . more ]\n"
        "z = 3\n"
        "[[sec.array]]\n"
        "old = 1\n"
        "[[sec.array]]\n"
        "[sec.array.t]\n"
    )


def test_a_new_name_that_needs_quotes_gets_them():
    new_text, _, _ = migrate("[t]\nold = 1\n", {("t",): {"old": "new.name"}})
    assert new_text == '[t]\n"new.name" = 1\n'
    assert tomllib.loads(new_text) == {"t": {"new.name": 1}}


def test_two_old_keys_for_one_new_key_conflict():
    text = "[t]\nold = 1\nolder = 2\n"
    new_text, _, conflicts = migrate(text, {("t",): {"old": "new", "older": "new"}})
    assert new_text == text
    assert [(c.old, c.new, c.other) for c in conflicts] == [("older", "new", "old")]


def test_a_chain_of_renames_goes_to_the_last_name(monkeypatch):
    from trainspec.cli import migrate_config

    info = migrate_config.schema_info("sft")
    keys = dict(info.keys)
    fake = type(info.keys[("deployment", "num_eval_gpus")])
    keys[("deployment", "num_infer_gpus")] = fake(("deployment", "num_infer_gpus"))
    keys[("deployment", "num_infer_gpus")].renamed_to = "num_gpus_for_inference"
    stub = type("Stub", (), {"keys": keys, "variants": {}})()
    monkeypatch.setattr(migrate_config, "schema_info", lambda kind: stub)
    assert migrate_config.rules_for("sft").renames[("deployment",)]["num_eval_gpus"] == (
        "num_gpus_for_inference"
    )


def test_nothing_to_do_leaves_the_text_alone():
    text = "[t]\nkeep = 1\n"
    assert migrate(text, {("t",): {"old": "new"}}) == (text, [], [])


def test_cannot_rewrite_is_an_error_not_a_wrong_file(tmp_path, monkeypatch):
    from trainspec.cli import migrate_config

    def broken(text, renames):
        return text.replace("num_eval_gpus", "num_infer_gpus").replace("max_steps", "steps")

    monkeypatch.setattr(migrate_config, "rewrite", broken)
    text = DIRECTIVE + "max_steps = 4\n" + BODY + "\n[deployment]\nnum_eval_gpus = 1\n"
    path = write(tmp_path, text)
    code, _, err = call(str(path))
    assert code == 2 and read(path) == text
    assert f"{path}: cannot rename its keys safely" in err
    with pytest.raises(CannotRewrite):
        migrate_config.migrate_text(text, tomllib.loads(text), rules_for("sft"))


def test_symlinks_are_followed(tmp_path):
    real = write(tmp_path, OLD, "real.toml")
    link = tmp_path / "link.toml"
    os.symlink(real, link)
    assert call(str(link))[0] == 0
    assert link.is_symlink() and read(real) == NEW
