"""The run directory's own files: the resolved config (JSON and TOML) written at start."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tomlkit

from trainspec.config import dump_json
from trainspec.config.bundle import BUNDLE_DIR, SCHEMA_NAMES
from trainspec.config.toml_text import toml_ready
from trainspec.kinds import Kind


def write_resolved_config(config, run_dir: Path, kind: Kind) -> dict[str, Any]:
    """run_dir/config.json and run_dir/config.toml; both validate back to this config."""
    run_dir.mkdir(parents=True, exist_ok=True)
    text = dump_json(config)
    (run_dir / "config.json").write_text(text + "\n")
    document = json.loads(text)
    schema = BUNDLE_DIR / f"{SCHEMA_NAMES[kind]}.json"
    header = f"#:schema {schema}\n# the resolved config this run started with\n"
    (run_dir / "config.toml").write_text(header + tomlkit.dumps(toml_ready(document)))
    return document
