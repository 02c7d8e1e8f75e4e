"""`make gen` is deterministic and `make check` catches hand edits and stale output."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

COPIED = (
    "schema",
    "generated",
    "docs",
    "scripts",
    "tools",
    "src",
    "pyproject.toml",
    "Makefile",
    "mkdocs.yml",
)


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("repo")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    (dest / "tests").mkdir()
    return dest


def make(repo: Path, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", target, f"PYTHON={sys.executable}"],
        cwd=repo,
        capture_output=True,
        text=True,
    )


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_gen_twice_is_byte_identical_and_matches_committed(repo_copy):
    committed = snapshot(repo_copy / "generated") | snapshot(repo_copy / "docs")
    assert make(repo_copy, "gen").returncode == 0
    first = snapshot(repo_copy / "generated") | snapshot(repo_copy / "docs")
    assert make(repo_copy, "gen").returncode == 0
    assert snapshot(repo_copy / "generated") | snapshot(repo_copy / "docs") == first
    assert first == committed, "generated/ or docs/ in the repository is stale: run make gen"


def test_check_passes_on_clean_tree(repo_copy):
    """The control of the drift tests below: on the copy as committed, the steps of `make check`
    that come before and at the drift check pass (the rest of `make check`, the type check and
    the docs build, runs on the tree itself before `make test` runs this suite)."""
    result = make(repo_copy, "lint")
    assert result.returncode == 0, result.stdout + result.stderr
    result = subprocess.run(
        [sys.executable, "scripts/gen.py", "--check"], cwd=repo_copy, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "edit, expected",
    [
        ("generated", "differs: generated/gc.py"),
        ("schema", "differs: generated/gc.py"),
        ("extra_file", "not written by make gen: generated/handwritten.py"),
        ("bundle", "differs: generated/schemas/rl_trainer.json"),
        ("docs", "differs: docs/reference/sft.md"),
        ("docs_extra", "not written by make gen: docs/reference/old.md"),
        ("docs_missing", "missing: docs/reference/rl.md"),
    ],
)
def test_check_fails_on_drift(repo_copy, tmp_path, edit, expected):
    repo = tmp_path / "repo"
    shutil.copytree(repo_copy, repo)
    if edit == "generated":
        target = repo / "generated" / "gc.py"
        target.write_text(target.read_text().replace("= 50", "= 51"))
    elif edit == "schema":
        target = repo / "schema" / "gc.json"
        target.write_text(target.read_text().replace('"default": 50', '"default": 60'))
    elif edit == "bundle":
        target = repo / "generated" / "schemas" / "rl_trainer.json"
        target.write_text(target.read_text().replace("Peak learning rate.", "Peak rate."))
    elif edit == "docs":
        target = repo / "docs" / "reference" / "sft.md"
        target.write_text(target.read_text().replace("Peak learning rate.", "Peak rate."))
    elif edit == "docs_extra":
        (repo / "docs" / "reference" / "old.md").write_text("# a page make gen does not write\n")
    elif edit == "docs_missing":
        (repo / "docs" / "reference" / "rl.md").unlink()
    else:
        (repo / "generated" / "handwritten.py").write_text("x = 1\n")
    result = make(repo, "check")
    assert result.returncode != 0
    assert expected in result.stderr
    assert "run `make gen`" in result.stderr


def _view_of(tmp_path: Path, documents: dict[str, dict]) -> dict[str, dict]:
    import json

    from tools.gen_view import lazy_tables

    for name, document in documents.items():
        (tmp_path / name).write_text(json.dumps(document))
    lazy_tables(tmp_path)
    return {name: json.loads((tmp_path / name).read_text()) for name in documents}


def test_a_lazy_table_is_typed_lazytable_and_names_its_class(tmp_path):
    table = {"title": "EvalsEvalConfig", "type": "object"}
    holder = {
        "title": "Holder",
        "properties": {
            "eval": {
                "anyOf": [{"$ref": "sft_eval.json"}, {"type": "null"}],
                "x-trainspec-lazy": True,
            },
            "val": {"anyOf": [{"$ref": "sft_eval.json"}, {"type": "null"}]},
        },
    }
    view = _view_of(tmp_path, {"sft_eval.json": table, "holder.json": holder})
    props = view["holder.json"]["properties"]
    assert props["eval"] == {
        "x-trainspec-lazy": "sft_eval:EvalsEvalConfig",
        "anyOf": [{"customTypePath": "trainspec.config_model.LazyTable"}, {"type": "null"}],
    }
    assert props["val"] == holder["properties"]["val"]  # not marked: left as it was
    assert view["sft_eval.json"] == table


@pytest.mark.parametrize(
    "marked",
    [
        {"$ref": "#/$defs/eval"},  # a definition inside a file: no module of its own
        {"anyOf": [{"$ref": "a.json"}, {"$ref": "b.json"}]},  # which one?
        {"type": "object"},
    ],
)
def test_a_lazy_mark_without_one_schema_file_is_refused(tmp_path, marked):
    holder = {"title": "Holder", "properties": {"eval": {**marked, "x-trainspec-lazy": True}}}
    with pytest.raises(ValueError, match="x-trainspec-lazy needs one \\$ref"):
        _view_of(tmp_path, {"a.json": {"title": "A"}, "b.json": {"title": "B"}, "h.json": holder})
