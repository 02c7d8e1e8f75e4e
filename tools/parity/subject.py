"""What the parity proof checks: a schema directory, the generated classes and the config layer
that reads them, loaded so that `--schema` and `--generated` reach every check.

`--generated DIR` is imported as `trainspec.generated` itself, before anything else imports it,
so the rules, the loader and the stage-1 checker all run on those classes. `--schema DIR` is
bundled into a temporary directory that stage 1 reads instead of the committed bundles. Code
drifts (src/) are proved by running the proof with PYTHONPATH pointing at a copy of src/.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainspec.kinds import KIND_INFO, TRAINER_KINDS

from ..bundle_schema import bundle
from ..gen_view import view

KINDS = {kind: (KIND_INFO[kind].schema, KIND_INFO[kind].class_name) for kind in TRAINER_KINDS}


@dataclass
class Subject:
    schema_dir: Path
    schemas: dict[str, dict[str, Any]]  # kind -> bundle of schema/ (what editors and stage 1 read)
    views: dict[str, dict[str, Any]]  # kind -> bundle of the classes' view (no TOML conventions)
    classes: dict[str, type]


def _import_generated(generated: Path) -> None:
    if "trainspec.generated" in sys.modules:
        raise RuntimeError("--generated must be loaded before trainspec.generated is imported")
    import trainspec

    spec = importlib.util.spec_from_file_location(
        "trainspec.generated",
        generated / "__init__.py",
        submodule_search_locations=[str(generated)],
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["trainspec.generated"] = module
    spec.loader.exec_module(module)
    trainspec.generated = module


def load_subject(schema_dir: Path, generated: Path | None, scratch: Path) -> Subject:
    if generated is not None:
        _import_generated(generated)
    from trainspec.config import bundle as bundles

    schemas = {kind: bundle(schema_dir, name) for kind, (name, _) in KINDS.items()}
    stage1 = scratch / "bundles"
    stage1.mkdir()
    for name in set(bundles.SCHEMA_NAMES.values()):
        if (schema_dir / f"{name}.json").exists():
            (stage1 / f"{name}.json").write_text(json.dumps(bundle(schema_dir, name)))
    bundles.BUNDLE_DIR = stage1
    bundles.bundled_schema.cache_clear()
    view_dir = scratch / "view"
    view(schema_dir, view_dir)
    views = {kind: bundle(view_dir, name) for kind, (name, _) in KINDS.items()}
    classes = {
        kind: getattr(
            importlib.import_module(f"trainspec.generated.{KIND_INFO[kind].module}"), name
        )
        for kind, (_, name) in KINDS.items()
    }
    return Subject(schema_dir, schemas, views, classes)


def scratch_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="parity-")


def classes_accept(cls: type, document: Any) -> tuple[bool, Any]:
    from pydantic import ValidationError

    try:
        return True, cls.model_validate(document)
    except (ValidationError, ValueError, TypeError):
        return False, None


def stage1_accepts(kind: str, document: dict[str, Any]) -> bool:
    """Stage 1's verdict: the JSON Schema plus what trainspec adds to it (integer-valued floats,
    values JSON cannot hold)."""
    from trainspec.config import schema_check

    return not schema_check.check(kind, document)
