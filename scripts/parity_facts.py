"""What a JSON Schema declares about each key: types, allowed constants, bounds, default and
whether it is required. Applied to schema/ and to the generated classes' own JSON Schema
(`model_json_schema()`), the two must agree key by key."""

from __future__ import annotations

import json
from typing import Any

from trainspec.config.bundle import resolve_ref
from trainspec.config.schema_info import json_type

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
NO_DEFAULT = "<no default>"


def _branches(root: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a value may take (anyOf/oneOf flattened), each resolved."""
    node = resolve_ref(root, node)
    found = []
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, []):
            found += _branches(root, branch)
    rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
    if not found or any(k in rest for k in ("type", "const", "enum", "properties")):
        found.append(rest)
    return found


def _objects(root: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """Object schemas among the alternatives, with allOf parts merged in, each with the `type`
    tag that selects it when it is a variant of a union."""
    objects = []
    for branch in _branches(root, node):
        properties, required = dict(branch.get("properties", {})), list(branch.get("required", []))
        for part in branch.get("allOf", []):
            for sub in _objects(root, part):
                properties = {**sub["properties"], **properties}
                required += sub["required"]
        if properties or branch.get("type") == "object":
            tag = resolve_ref(root, properties.get("type", {})).get("const")
            objects.append({"properties": properties, "required": required, "tag": tag})
    return objects


def _describe(root: dict[str, Any], prop: dict[str, Any], fact: dict[str, Any]) -> None:
    for branch in _branches(root, prop):
        kinds = branch.get("type")
        for kind in [kinds] if isinstance(kinds, str) else kinds or []:
            fact["types"].add(kind)
        for value in [branch["const"]] if "const" in branch else branch.get("enum", []):
            fact["consts"].add(json.dumps(value))
            fact["types"].add(json_type(value))
        if "properties" in branch or "allOf" in branch:
            fact["types"].add("object")
        for bound in BOUNDS:
            if bound in branch:
                fact[bound] = float(branch[bound])
        if isinstance(branch.get("items"), dict):
            inner = {"types": set(), "consts": set()}
            _describe(root, branch["items"], inner)
            fact["items"] = json.dumps(sorted(inner["types"])) + json.dumps(sorted(inner["consts"]))


def facts(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Dotted key path → declared facts, for every key reachable from the root."""
    found: dict[str, dict[str, Any]] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        if prefix.count(".") > 12:
            return  # the config tree is shallow; this only guards a recursive schema
        objects = _objects(schema, node)
        union = len(objects) > 1 and all(obj["tag"] is not None for obj in objects)
        for obj in objects:
            # Keys of a union variant are told apart by the variant: optim[muon].betas2.
            here = f"{prefix[:-1]}[{obj['tag']}]." if union and prefix else prefix
            for name, prop in obj["properties"].items():
                if isinstance(prop, dict) and prop.get("not") == {}:
                    continue  # a renamed key: accepts nothing, the classes lack it too
                path = f"{here}{name}"
                fact = found.setdefault(path, {"types": set(), "consts": set()})
                fact["required"] = fact.get("required", False) or name in obj["required"]
                if "default" in prop:
                    fact["default"] = json.dumps(prop["default"], sort_keys=True)
                _describe(schema, prop, fact)
                walk(prop, f"{path}.")

    walk(schema, "")
    for fact in found.values():
        fact.setdefault("default", NO_DEFAULT)
        fact["types"] = sorted(fact["types"])
        fact["consts"] = sorted(fact["consts"])
    return found


def differences(expected: dict, actual: dict, left: str, right: str) -> list[str]:
    """Readable differences between two fact tables."""
    out = []
    for path in sorted(expected.keys() | actual.keys()):
        if path not in actual:
            out.append(f"{path}: in {left}, missing from {right}")
        elif path not in expected:
            out.append(f"{path}: in {right}, missing from {left}")
        else:
            for key in sorted(expected[path].keys() | actual[path].keys()):
                a, b = expected[path].get(key), actual[path].get(key)
                if a != b:
                    out.append(f"{path}: {key} is {a} in {left} but {b} in {right}")
    return out
