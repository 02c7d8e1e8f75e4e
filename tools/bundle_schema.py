"""Bundle a schema of schema/ and every file it references into one self-contained document.

Each referenced file lands under ``$defs`` by its stem (``optimizer.json`` → ``#/$defs/optimizer``)
and every ``$ref`` becomes a local JSON pointer, so tools that cannot follow relative file
references (and stage 1 of validate-config) read one file.

Keys listed in an object's ``x-trainspec-renamed`` map (old name → new name) become deprecated
properties that accept no value.

Objects the hand-written schema builds with ``allOf`` and closes with
``unevaluatedProperties: false`` (the trainers over the shared base, optimizer variants over
their common fields) are flattened into one closed object with ``additionalProperties: false``:
the same set of valid documents, in the form every editor understands (taplo ignores
``unevaluatedProperties``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainspec.schema_walk import objects

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
    out = _flatten(out, out)
    return _renamed_stubs(_prune(out))


def _renamed_stubs(node: Any) -> Any:
    """Each key of an ``x-trainspec-renamed`` map becomes a deprecated property that no value
    satisfies, so editors strike it through and say where it went, and validation fails."""
    if isinstance(node, list):
        return [_renamed_stubs(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _renamed_stubs(value) for key, value in node.items()}
    for old, new in node.get("x-trainspec-renamed", {}).items():
        node.setdefault("properties", {})[old] = {
            "description": f"Renamed to `{new}`: write {new} instead.",
            "deprecated": True,
            "x-trainspec-renamed-to": new,
            "not": {},
        }
    return node


def _object_parts(root: dict[str, Any], node: dict[str, Any]) -> tuple[dict, list]:
    """(properties, required) an allOf part contributes, following refs and nested allOf."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for shape in objects(root, node):
        properties.update(shape.properties)
        required += shape.required
    return properties, required


def _flatten(node: Any, root: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_flatten(item, root) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _flatten(value, root) for key, value in node.items()}
    if "allOf" in node and node.get("unevaluatedProperties") is False:
        properties: dict[str, Any] = {}
        required: list[str] = []
        for part in node["allOf"]:
            more, needed = _object_parts(root, _flatten(part, root))
            properties.update(more)
            required += needed
        properties.update(node.get("properties", {}))
        required += node.get("required", [])
        flat = {k: v for k, v in node.items() if k not in ("allOf", "unevaluatedProperties")}
        flat["type"] = "object"
        flat["properties"] = properties
        if required:
            flat["required"] = list(dict.fromkeys(required))
        flat["additionalProperties"] = False
        return flat
    return node


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            found.add(node["$ref"])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


def _prune(root: dict[str, Any]) -> dict[str, Any]:
    """Drop bundled files nothing refers to any more (the base a trainer was flattened over)."""
    while True:
        found: set[str] = set()
        _refs({k: v for k, v in root.items() if k != "$defs"}, found)
        for stem, part in root.get("$defs", {}).items():
            inner: set[str] = set()
            _refs(part, inner)
            found |= {ref for ref in inner if not ref.startswith(f"#/$defs/{stem}/")}
        used = {ref.removeprefix("#/$defs/").split("/")[0] for ref in found}
        unused = [stem for stem in root.get("$defs", {}) if stem not in used]
        if not unused:
            return root
        for stem in unused:
            del root["$defs"][stem]


def write_bundle(schema_dir: Path, name: str, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(bundle(schema_dir, name), indent=2, ensure_ascii=False) + "\n")
    return path
