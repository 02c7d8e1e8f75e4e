"""The validator cache: later processes load the built validator; a missing, corrupt or
stale file falls back to pydantic's own build, and no verdict changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.support import ROOT

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


def run(cache: Path, **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "TRAINSPEC_NO_CACHE"}
    environment |= {"TRAINSPEC_CACHE_DIR": str(cache), **env}
    result = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(DOCUMENTS)],
        capture_output=True,
        text=True,
        env=environment,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


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
