"""The validator cache: later processes load the built validator; a missing, corrupt or
stale file falls back to pydantic's own build, and no verdict changes."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT, python_json

CHECK = """
import json, sys
from trainspec.config import ConfigError, validate
from trainspec.config.kinds import config_class
documents = json.loads(sys.argv[1])
cls = config_class("rl")
out = {"cached": "MockValSer" not in type(cls.__pydantic_validator__).__name__}
verdicts = []
for document in documents:
    try:
        verdicts.append(validate("rl", document).config.model_dump(mode="json"))
    except ConfigError as err:
        verdicts.append([(e.path, e.message) for e in err.errors])
out["verdicts"] = verdicts
print(json.dumps(out))
"""
DOCUMENTS = [
    {},
    {"optim": {"lr": 3e-4, "type": "sgd"}, "max_steps": 5},
    {"max_steps": "5"},
    {"max_steps": 5.0},
    {"model": {"full_offload": True}, "optim": {"type": "muon"}},
    {"scheduler": {"type": "cosine"}},
]


def run(cache: Path | None, **env: str) -> dict:
    """CHECK in a process of its own, its cache in `cache` (None: the default directory)."""
    return python_json(CHECK, json.dumps(DOCUMENTS), cache=cache, **env)


@pytest.fixture(scope="module")
def uncached(tmp_path_factory) -> dict:
    return run(tmp_path_factory.mktemp("none"), TRAINSPEC_NO_CACHE="1")


def test_the_first_process_stores_and_the_next_loads(tmp_path, uncached):
    first = run(tmp_path)
    stored = list(tmp_path.glob("validator-rl-*.pickle"))
    assert len(stored) == 1 and stored[0].stat().st_mode & 0o077 == 0  # the owner's only
    second = run(tmp_path)
    assert second["cached"] and not uncached["cached"]
    assert first["verdicts"] == second["verdicts"] == uncached["verdicts"]


@pytest.mark.parametrize("damage", [b"", b"not a pickle", b"\x80\x04K\x01."])
def test_a_damaged_file_falls_back_to_a_build(tmp_path, uncached, damage):
    run(tmp_path)
    (stored,) = tmp_path.glob("validator-rl-*.pickle")
    stored.write_bytes(damage)
    again = run(tmp_path)
    assert again["verdicts"] == uncached["verdicts"]
    assert run(tmp_path)["cached"]  # rewritten whole by the fallback


def test_other_generated_classes_get_their_own_file(tmp_path):
    """The key covers the generated code this process imported: a copy with one default
    changed (as parity's drift tests make) must not load the original's validator."""
    copy = tmp_path / "src"
    import shutil

    shutil.copytree(ROOT / "src" / "trainspec", copy / "trainspec")
    shutil.copytree(ROOT / "generated", copy / "trainspec" / "generated")
    gc = copy / "trainspec" / "generated" / "gc.py"
    gc.write_text(gc.read_text().replace("= 50", "= 51"))
    cache = tmp_path / "cache"
    run(cache)
    probe = (
        "from trainspec.config import validate; "
        "print(validate('rl', {'gc': {}}).config.gc.interval)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "TRAINSPEC_CACHE_DIR": str(cache), "PYTHONPATH": str(copy)},
        cwd=tmp_path,
        timeout=300,
    )
    assert result.stdout.strip() == "51", result.stderr
    assert len(list(cache.glob("validator-rl-*.pickle"))) == 2


class Payload:
    """Pickles as "call exec on this code": unpickling it creates `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.parametrize("loosen", ["file", "directory", "owner", None])
def test_a_file_someone_else_could_have_written_is_never_unpickled(tmp_path, uncached, loosen):
    """The cache file's name is predictable: in a directory others can write to, or written
    by someone else, it could be anything. Such a file is ignored (the validator is built, the
    verdicts are the same) and its pickle never runs; only this user's private file is loaded
    (loosen None: the payload runs, which is what the check keeps anyone else from doing)."""
    if loosen == "owner" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    cache = tmp_path / "cache"
    run(cache)
    (stored,) = cache.glob("validator-rl-*.pickle")
    marker = tmp_path / "ran"
    payload = pickle.dumps(Payload(marker))
    stored.write_bytes(payload)
    if loosen == "file":
        stored.chmod(0o620)  # the owner's, but group-writable
    elif loosen == "directory":
        cache.chmod(0o770)
    elif loosen == "owner":
        os.chown(stored, 12345, 12345)
    again = run(cache)
    assert marker.exists() == (loosen is None)
    assert again["verdicts"] == uncached["verdicts"]
    if loosen in ("file", "owner"):  # the fallback's own file replaces it, private
        (stored,) = cache.glob("validator-rl-*.pickle")
        assert stored.stat().st_mode & 0o077 == 0 and stored.stat().st_uid == os.geteuid()
        assert stored.read_bytes() != payload


def test_a_link_in_place_of_the_file_is_not_followed(tmp_path, uncached):
    cache = tmp_path / "cache"
    run(cache)
    (stored,) = cache.glob("validator-rl-*.pickle")
    elsewhere = tmp_path / "elsewhere.pickle"
    elsewhere.write_bytes(pickle.dumps(Payload(tmp_path / "ran")))
    elsewhere.chmod(0o600)
    stored.unlink()
    stored.symlink_to(elsewhere)
    assert run(cache)["verdicts"] == uncached["verdicts"]
    assert not (tmp_path / "ran").exists()


def test_a_shared_cache_directory_is_left_alone_and_the_default_one_is_made_private(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    run(shared)
    assert list(shared.iterdir()) == []  # nothing stored where it would never be read
    assert shared.stat().st_mode & 0o7777 == 0o1777
    default = tmp_path / "xdg" / "trainspec"
    default.mkdir(parents=True)
    default.chmod(0o775)  # as an older trainspec made it under umask 002
    run(None, XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert default.stat().st_mode & 0o777 == 0o700
    assert len(list(default.glob("validator-rl-*.pickle"))) == 1
