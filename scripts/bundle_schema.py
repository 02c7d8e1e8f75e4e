"""Bundle a schema of schema/ and every file it references into one self-contained document.

Each referenced file lands under ``$defs`` by its stem (``optimizer.json`` → ``#/$defs/optimizer``)
and every ``$ref`` becomes a local JSON pointer, so tools that cannot follow relative file
references (and stage 1 of validate-config) read one file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ID_PREFIX = "urn:trainspec:schema:"


def _pointer(file: str, fragment: str, root: str) -> str:
    stem = Path(file).stem
    base = "#" if stem == root else f"#/$defs/{stem}"
    return base + fragment.removeprefix("#")


def _rewrite(node: Any, here: str, root: str, needed: set[str]) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                file, _, fragment = value.partition("#")
                file = file or here
                needed.add(file)
                out[key] = _pointer(file, "#" + fragment, root)
            else:
                out[key] = _rewrite(value, here, root, needed)
        return out
    if isinstance(node, list):
        return [_rewrite(item, here, root, needed) for item in node]
    return node


def bundle(schema_dir: Path, name: str) -> dict[str, Any]:
    """The schema `name` (e.g. "rl_trainer") with every referenced file inlined into $defs."""
    root = name
    needed: set[str] = set()
    doc = _rewrite(
        json.loads((schema_dir / f"{name}.json").read_text()), f"{name}.json", root, needed
    )
    embedded: dict[str, Any] = {}
    done = {f"{name}.json"}
    while needed - done:
        file = sorted(needed - done)[0]
        done.add(file)
        part = _rewrite(json.loads((schema_dir / file).read_text()), file, root, needed)
        part.pop("$schema", None)
        embedded[Path(file).stem] = part
    out = {"$schema": doc.pop("$schema"), "$id": f"{ID_PREFIX}{name}"}
    out.update(doc)
    defs = out.setdefault("$defs", {})
    for stem in sorted(embedded):
        if stem in defs:
            raise ValueError(f"{name}.json: $defs/{stem} clashes with the bundled {stem}.json")
        defs[stem] = embedded[stem]
    return out


def write_bundle(schema_dir: Path, name: str, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(bundle(schema_dir, name), indent=2, ensure_ascii=False) + "\n")
    return path
