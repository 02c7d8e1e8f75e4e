"""A run directory belongs to one run: its identity is recorded and compared, a second process
finds it locked, `clean` empties it but for the lock (and only a directory its identity file
marks as a run's), and a relaunch finds the same one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.run.lock import LOCK_FILE, lock_run_dir, release_run_dir
from trainspec.trainers.run.run_dir import IDENTITY_FILE, claim_run_dir

BASE = {"model.name": "builtin:tiny-qwen3", "data.type": "fake", "run.name": "r"}


def sft(tmp_path: Path, **settings):
    return load("sft", [], {**BASE, "output_dir": str(tmp_path), **settings}).config


def claim(config, run_dir: Path, clean: bool = False) -> dict:
    try:
        return claim_run_dir(config, "sft", run_dir, setting="run.name", clean=clean)
    finally:
        release_run_dir(run_dir)


def test_the_first_start_records_the_identity_and_a_rerun_passes(tmp_path):
    run_dir = tmp_path / "r"
    document = claim(sft(tmp_path), run_dir)
    recorded = json.loads((run_dir / IDENTITY_FILE).read_text())
    assert recorded["kind"] == "sft" and recorded["model"]["name"] == "builtin:tiny-qwen3"
    assert document == json.loads((run_dir / "config.json").read_text())
    # What does not change what is trained may change between starts.
    claim(sft(tmp_path, **{"log.level": "debug", "ckpt.interval": 3, "max_steps": 9}), run_dir)


def test_another_run_is_refused_naming_what_differs(tmp_path):
    run_dir = tmp_path / "r"
    claim(sft(tmp_path), run_dir)
    (run_dir / "checkpoints" / "step_6").mkdir(parents=True)
    with pytest.raises(SetupError) as caught:
        claim(sft(tmp_path, **{"model.debug.num_layers": 1, "optim.lr": 2e-3}), run_dir)
    assert caught.value.path == "run.name"
    assert "model.debug.num_layers = 1 here, its default there" in caught.value.problem
    assert "optim.lr = 0.002 here" in caught.value.problem
    assert "clean = true" in caught.value.fix and "resume.dir" in caught.value.fix
    assert (run_dir / "checkpoints" / "step_6").is_dir()  # nothing of the first run is touched
    assert json.loads((run_dir / IDENTITY_FILE).read_text())["model"].get("debug") == {}


def test_a_directory_from_before_identities_is_compared_through_its_config(tmp_path):
    run_dir = tmp_path / "r"
    claim(sft(tmp_path), run_dir)
    (run_dir / IDENTITY_FILE).unlink()  # as trainspec wrote run directories before
    with pytest.raises(SetupError) as caught:
        claim(sft(tmp_path, **{"data.batch_size": 16}), run_dir)
    assert "data.batch_size = 16 here" in caught.value.problem


def test_clean_empties_the_directory_and_records_the_new_run(tmp_path):
    run_dir = tmp_path / "r"
    claim(sft(tmp_path), run_dir)
    (run_dir / "checkpoints" / "step_2").mkdir(parents=True)
    claim(sft(tmp_path, **{"optim.lr": 2e-3}), run_dir, clean=True)
    assert not (run_dir / "checkpoints").exists()
    assert json.loads((run_dir / IDENTITY_FILE).read_text())["optim"]["lr"] == 2e-3
    assert (run_dir / LOCK_FILE).is_file()


@pytest.mark.parametrize(
    "identity",
    [None, '{"name": "someone else\'s"}', "not json", '["sft"]'],
    ids=["none", "another-program", "not-json", "not-an-object"],
)
def test_clean_refuses_a_directory_no_identity_file_marks_and_leaves_its_files(tmp_path, identity):
    """A mistyped output_dir or run.dir must not empty someone's directory: clean empties only
    one whose identity.json marks it as a trainspec run's (refused before the lock, which
    would leave a file there)."""
    run_dir = tmp_path / "r"
    (run_dir / "notes").mkdir(parents=True)
    (run_dir / "notes" / "a.txt").write_text("a\n")
    (run_dir / "thesis.tex").write_text("years of work\n")
    if identity is not None:
        (run_dir / IDENTITY_FILE).write_text(identity)
    before = sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*"))
    with pytest.raises(SetupError) as caught:
        claim(sft(tmp_path), run_dir, clean=True)
    shown = "identity.json, notes, thesis.tex" if identity is not None else "notes, thesis.tex"
    assert caught.value.path == "clean"
    assert caught.value.problem == (
        f"= true would delete everything in {run_dir} ({shown}), and no identity.json there "
        "marks it as a trainspec run's directory: clean deletes only those"
    )
    assert caught.value.fix == (
        "point run.dir (or output_dir) at a directory of its own for this run; or, if those "
        "files are to go, delete them yourself and start again"
    )
    assert sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*")) == before


def test_clean_starts_in_a_new_or_empty_directory(tmp_path):
    claim(sft(tmp_path), tmp_path / "new", clean=True)
    (tmp_path / "empty").mkdir()
    claim(sft(tmp_path), tmp_path / "empty", clean=True)
    for name in ("new", "empty"):
        assert json.loads((tmp_path / name / IDENTITY_FILE).read_text())["kind"] == "sft"


HOLDER = """
import sys, time
from pathlib import Path
from trainspec.trainers.run.lock import lock_run_dir
lock_run_dir(Path(sys.argv[1]), "sft", setting="run.name")
print("locked", flush=True)
time.sleep(600)
"""


def test_a_second_process_finds_the_directory_locked_and_a_dead_holder_frees_it(tmp_path):
    run_dir = tmp_path / "r"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(SetupError) as caught:
            lock_run_dir(run_dir, "sft", setting="run.name")
        assert f"in use by pid {holder.pid}" in caught.value.problem
        assert "another run.name" in caught.value.fix
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 60  # the kernel drops the lock with the process
    while True:
        try:
            lock_run_dir(run_dir, "sft", setting="run.name")
            break
        except SetupError:
            assert time.monotonic() < deadline, "the lock outlived its process"
            time.sleep(0.1)
    assert json.loads((run_dir / LOCK_FILE).read_text())["pid"] == os.getpid()
    release_run_dir(run_dir)


@pytest.mark.parametrize("spelling", ["outputs", "./outputs", "outputs/", "{tmp}/outputs"])
def test_the_default_run_name_does_not_depend_on_how_output_dir_is_written(tmp_path, spelling):
    def name(output_dir: str, **settings) -> str:
        overrides = {"model.name": "builtin:tiny-qwen3", "output_dir": output_dir, **settings}
        return load("sft", [], overrides).config.run.name

    reference = name("outputs")
    assert name(spelling.format(tmp=tmp_path)) == reference
    # Nor on settings that train nothing differently.
    quiet = {"val": None, "data.num_workers": 2, "gc.interval": 5}
    assert name("outputs", **quiet, **{"deployment.num_train_gpus": 2}) == reference
    assert name("outputs", **{"data.micro_batch_size": 2}) == reference
    assert name("outputs", **{"optim.lr": 2e-5}) != reference
