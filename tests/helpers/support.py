"""Test helpers: paths of the repository and JSON Schema validators for each kind."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

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
