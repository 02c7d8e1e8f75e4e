"""What a JSON Schema declares about each key: types, allowed constants, bounds, pattern,
default, whether it is required, and trainspec's extensions (the auto table, switches).
Applied to the classes' view of schema/ and to the generated classes' own JSON Schema
(`model_json_schema()`), the two must agree key by key."""

from __future__ import annotations

import json
from typing import Any

from trainspec.config.schema_info import json_type
from trainspec.schema_walk import branches, objects

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
NO_DEFAULT = "<no default>"
EXTENSIONS = ("x-trainspec-auto", "x-trainspec-switch")
ITEM = "*"  # a list's items or a map's values, in a key path: eval.source.*.interval


def _describe(root: dict[str, Any], prop: dict[str, Any], fact: dict[str, Any]) -> None:
    for branch in branches(root, prop):
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
        if "pattern" in branch:
            fact["pattern"] = branch["pattern"]
        if isinstance(branch.get("items"), dict):
            inner = {"types": set(), "consts": set()}
            _describe(root, branch["items"], inner)
            fact["items"] = json.dumps(sorted(inner["types"])) + json.dumps(sorted(inner["consts"]))


def facts(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Dotted key path → declared facts, for every key reachable from the root."""
    found: dict[str, dict[str, Any]] = {}

    def key(path: str, prop: Any, required: bool) -> None:
        fact = found.setdefault(path, {"types": set(), "consts": set()})
        fact["required"] = fact.get("required", False) or required
        if "default" in prop:
            fact["default"] = json.dumps(prop["default"], sort_keys=True)
        for extension in EXTENSIONS:  # stated by the schema, copied into the classes
            if extension in prop:
                fact[extension] = json.dumps(prop[extension], sort_keys=True)
        _describe(schema, prop, fact)
        walk(prop, f"{path}.")
        for branch in branches(schema, prop):
            # a list's items and a map's values are keys too: eval.source.*.name, stops.*.priority
            inner = branch.get("items")
            if not isinstance(inner, dict) and "properties" not in branch:
                inner = branch.get("additionalProperties")
            if isinstance(inner, dict):
                key(f"{path}.{ITEM}", inner, False)

    def walk(node: dict[str, Any], prefix: str) -> None:
        if prefix.count(".") > 12:
            return  # the config tree is shallow; this only guards a recursive schema
        shapes = objects(schema, node)
        union = len(shapes) > 1 and all(shape.tag is not None for shape in shapes)
        for shape in shapes:
            # Keys of a union variant are told apart by the variant: optim[muon].betas2.
            here = f"{prefix[:-1]}[{shape.tag}]." if union and prefix else prefix
            for name, prop in shape.properties.items():
                if isinstance(prop, dict) and prop.get("not") == {}:
                    continue  # a renamed key: accepts nothing, the classes lack it too
                key(f"{here}{name}", prop, name in shape.required)

    walk(schema, "")
    for fact in found.values():
        fact.setdefault("default", NO_DEFAULT)
        fact["types"] = sorted(fact["types"])
        fact["consts"] = sorted(fact["consts"])
    return found


def tables(declared: dict[str, dict[str, Any]]) -> set[str]:
    """The tables of a kind, named as `facts` names keys: each table that holds a declared key
    (`optim[muon]`, `eval.source.*`, "" for the document itself; a list of strings holds its
    items but is no table) and each key that holds a table (`optim`, `env_vars`)."""
    holding = {path for path, fact in declared.items() if "object" in fact["types"]}
    holders = {path.rpartition(".")[0] for path in declared}
    return holding | {path for path in holders if path not in declared or path in holding}


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
