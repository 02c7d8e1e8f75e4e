"""migrate-config's rewriting: renames from the schema, in every way TOML can write a key, with
everything else kept byte for byte; renames a later schema may add (deeper keys, tables, arrays
of tables); and a rewrite that would change anything else is refused, not written."""

from __future__ import annotations

import json
import tomllib

import pytest
from migrate_support import BODY, DIRECTIVE, ROOT, call, read, validate, write

from trainspec.cli import migrate_rewrite
from trainspec.cli.migrate_rewrite import CannotRewrite, RenameTable, migrate_text, renames_for

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
        for kind in ("rl", "sft", "orchestrator", "rl_run")
        for mapping in renames_for(kind).renames.values()
        for old, new in mapping.items()
    }
    declared = _declared_renames()
    assert ("num_eval_gpus", "num_infer_gpus") in declared
    assert declared <= derived
    assert renames_for("sft").renames[("deployment",)] == {
        "num_eval_gpus": "num_infer_gpus",
        "num_eval_nodes": "num_infer_nodes",
    }


# --- renames the schema may add later: deeper keys, tables, arrays of tables ---------------------


def migrate(text: str, renames: dict[tuple[str, ...], dict[str, str]]):
    return migrate_text(text, tomllib.loads(text), RenameTable(renames))


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
    info = migrate_rewrite.schema_info("sft")
    keys = dict(info.keys)
    fake = type(info.keys[("deployment", "num_eval_gpus")])
    keys[("deployment", "num_infer_gpus")] = fake(("deployment", "num_infer_gpus"))
    keys[("deployment", "num_infer_gpus")].renamed_to = "num_gpus_for_inference"
    stub = type("Stub", (), {"keys": keys, "variants": {}})()
    monkeypatch.setattr(migrate_rewrite, "schema_info", lambda kind: stub)
    assert renames_for("sft").renames[("deployment",)]["num_eval_gpus"] == (
        "num_gpus_for_inference"
    )


def test_nothing_to_do_leaves_the_text_alone():
    text = "[t]\nkeep = 1\n"
    assert migrate(text, {("t",): {"old": "new"}}) == (text, [], [])


def test_cannot_rewrite_is_an_error_not_a_wrong_file(tmp_path, monkeypatch):
    def broken(text, renames):
        return text.replace("num_eval_gpus", "num_infer_gpus").replace("max_steps", "steps")

    monkeypatch.setattr(migrate_rewrite, "rewrite", broken)
    text = DIRECTIVE + "max_steps = 4\n" + BODY + "\n[deployment]\nnum_eval_gpus = 1\n"
    path = write(tmp_path, text)
    code, _, err = call(str(path))
    assert code == 2 and read(path) == text
    assert f"{path}: cannot rename its keys safely" in err
    with pytest.raises(CannotRewrite):
        migrate_text(text, tomllib.loads(text), renames_for("sft"))
