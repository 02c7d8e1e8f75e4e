"""The single-file schemas `make gen` bundles into generated/schemas/ (what editors and stage 1
read)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import trainspec.generated

SCHEMA_NAMES = {
    "rl": "rl_trainer",
    "sft": "sft_trainer",
    "orchestrator": "orchestrator",
    "rl_run": "rl",
}
BUNDLE_DIR = Path(trainspec.generated.__file__).parent / "schemas"


@functools.cache
def bundled_schema(kind: str) -> dict[str, Any]:
    return json.loads((BUNDLE_DIR / f"{SCHEMA_NAMES[kind]}.json").read_text())


def resolve_ref(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with its local `$ref` (``#/$defs/...``) followed, sibling keywords kept."""
    while "$ref" in node:
        target: Any = root
        for part in node["$ref"].removeprefix("#").strip("/").split("/"):
            if part:
                target = target[part.replace("~1", "/").replace("~0", "~")]
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return node
