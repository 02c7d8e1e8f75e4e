"""Test helpers: paths of the repository, JSON Schema validators for each kind, and a Python
process of its own with a validator cache of the test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schema"
BUNDLE_DIR = ROOT / "generated" / "schemas"
SCHEMA_NAMES = {
    "rl": "rl_trainer",
    "sft": "sft_trainer",
    "orchestrator": "orchestrator",
    "rl_run": "rl",
    "inference": "inference_run",
    "eval": "eval",
}


@cache
def schema_validator(kind: str) -> Draft202012Validator:
    """Validator over the hand-written schema/ files, resolving relative $refs locally."""
    base = "file:///trainspec/schema/"
    resources = [
        (base + path.name, Resource.from_contents(json.loads(path.read_text())))
        for path in SCHEMA_DIR.glob("*.json")
    ]
    registry = Registry().with_resources(resources)
    root = {"$ref": base + f"{SCHEMA_NAMES[kind]}.json"}
    return Draft202012Validator(root, registry=registry)


@cache
def bundle_validator(kind: str) -> Draft202012Validator:
    """Validator over the single-file bundle that editors and stage 1 use."""
    schema = json.loads((BUNDLE_DIR / f"{SCHEMA_NAMES[kind]}.json").read_text())
    return Draft202012Validator(schema)


def schema_accepts(kind: str, document: dict) -> bool:
    by_files = schema_validator(kind).is_valid(document)
    by_bundle = bundle_validator(kind).is_valid(document)
    assert by_files == by_bundle, "bundle and schema/ disagree"
    return by_files


def python_json(code: str, *args: str, cache: Path | None, **env: str) -> Any:
    """`python -c code *args` in a process of its own, run from the repository root with its
    validator cache in `cache` (None: the default directory), `env` added; its stdout as JSON."""
    skip = ("TRAINSPEC_NO_CACHE", "TRAINSPEC_CACHE_DIR")
    environment = {k: v for k, v in os.environ.items() if k not in skip}
    environment |= {"TRAINSPEC_CACHE_DIR": str(cache)} if cache is not None else {}
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=environment | env,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)
