"""The single-file schemas `make gen` bundles into generated/schemas/ (what editors and stage 1
read)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import trainspec.generated
from trainspec.kinds import SCHEMA_NAMES, Kind
from trainspec.schema_walk import resolve_ref

__all__ = ["BUNDLE_DIR", "SCHEMA_NAMES", "bundled_schema", "resolve_ref"]

BUNDLE_DIR = Path(trainspec.generated.__file__).parent / "schemas"


@functools.cache
def bundled_schema(kind: Kind) -> dict[str, Any]:
    return json.loads((BUNDLE_DIR / f"{SCHEMA_NAMES[kind]}.json").read_text())
