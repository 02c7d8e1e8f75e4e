"""Run files written whole or not at all, and append-only records read past a torn last line
(run/atomic_files.py), on real files."""

from __future__ import annotations

import ast
import errno
import logging
import os
import stat
import threading
from pathlib import Path

import pytest

from trainspec.trainers.errors import SetupError
from trainspec.trainers.run import atomic_files
from trainspec.trainers.run.atomic_files import read_records, write_atomic


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_partial(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    path.write_text('{"old": true}\n')

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(path, '{"new": true}\n')
    assert path.read_text() == '{"old": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_a_private_file_is_its_owners_alone_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        write_atomic(tmp_path / "secret.json", "{}\n", private=True)
        write_atomic(tmp_path / "plain.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "secret.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "plain.json").stat().st_mode) == 0o666
    write_atomic(tmp_path / "secret.json", '{"again": 1}\n', private=True)  # replaced: still 0600
    assert stat.S_IMODE((tmp_path / "secret.json").stat().st_mode) == 0o600


def test_a_symlink_planted_at_the_temporary_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    path = tmp_path / "config.json"
    planted = tmp_path / f".config.json.{os.getpid()}.{threading.get_ident()}.tmp"
    planted.symlink_to(victim)
    write_atomic(path, "{}\n")
    assert victim.read_text() == "keep me\n"  # the link was removed, never written through
    assert path.read_text() == "{}\n" and not path.is_symlink() and not planted.is_symlink()


def test_a_torn_last_record_is_skipped_and_said(tmp_path, caplog):
    path = tmp_path / "picks.jsonl"
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "us')
    with caplog.at_level(logging.WARNING, logger="trainspec.run"):
        assert read_records(path) == [{"step": 0}, {"step": 1}]
    assert f"{path}:3: skipped a last line cut short by a crash" in caplog.text
    assert read_records(tmp_path / "none.jsonl") == []


def test_a_broken_record_before_others_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "picks.jsonl"
    path.write_text('{"step": 0}\n[1, 2]\n{"step": 2}\n')
    with pytest.raises(SetupError) as caught:
        read_records(path)
    assert caught.value.path == f"{path}:2"
    assert "not a whole JSON record (not a JSON object)" in caught.value.problem


# Files that write in place because what they write is published whole by a rename above them:
# a checkpoint's files go into a temporary step directory renamed once complete (ckpt/).
PUBLISHED_BY_RENAME = {"ckpt/files.py", "ckpt/hf_export.py"}
TRAINERS = Path(atomic_files.__file__).resolve().parents[1]


def writes_in_place(source: str) -> list[int]:
    """Lines of `source` that write a file in place: write_text / write_bytes, or open() in a
    mode that truncates or creates ("w", "x"); appending ("a") is how records are kept."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = (
            node.func.attr
            if isinstance(node.func, ast.Attribute)
            else getattr(node.func, "id", None)
        )
        if name in ("write_text", "write_bytes"):
            found.append(node.lineno)
        elif name == "open":  # open(path, mode) or path.open(mode)
            at = 0 if isinstance(node.func, ast.Attribute) else 1
            given = node.args[at : at + 1] + [k.value for k in node.keywords if k.arg == "mode"]
            mode = given[0].value if given and isinstance(given[0], ast.Constant) else "r"
            if isinstance(mode, str) and ("w" in mode or "x" in mode):
                found.append(node.lineno)
    return found


def test_every_run_file_is_written_through_write_atomic():
    """A crash mid-write tears a file written in place; every file a run writes goes through
    write_atomic (or is appended to), and this keeps it so."""
    offenders = []
    for path in sorted(TRAINERS.rglob("*.py")):
        where = path.relative_to(TRAINERS).as_posix()
        if where in PUBLISHED_BY_RENAME or where == "run/atomic_files.py":
            continue
        offenders += [f"{where}:{line}" for line in writes_in_place(path.read_text())]
    assert offenders == []
    # the check can fail: each way of writing in place is found
    planted = 'p.write_text("x")\nopen(p, "w")\np.open(mode="wb")\nopen("x.json")\np.open("a")\n'
    assert writes_in_place(planted) == [1, 2, 3]
