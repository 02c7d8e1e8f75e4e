"""The view of schema/ that the classes are generated from: the schema minus its TOML input
conventions.

schema/ states what a user may write, so editors accept it: the string "None" wherever a setting
can be null (TOML has no null), and `true`/`false` for a sub-config that is also a switch
(`x-trainspec-switch`, e.g. model.full_offload). Those are spellings of null and of "on with
defaults", not values a program should see, so `trainspec.config_model.ConfigModel` turns them
into null and `{}` before validation, and the classes are generated without them:
`int | None`, `FullOffloadConfig | None`, never a `NoneString` member.

A table marked `x-trainspec-lazy` (sft's [eval] and [inference]) is, for the generator only,
typed `LazyTable` and tagged with the module and class of its file (`sft_eval:EvalsEvalConfig`),
so the class that holds it does not import that module: `trainspec.config_model` loads it when
a config sets the table (`lazy_tables`; the parity proof compares the view before this step).

    view(schema_dir, out_dir)   # writes the view of every schema file into out_dir
    lazy_tables(out_dir)        # then, for the generator: the lazy tables typed LazyTable
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

NONE_REF = "common.json#/$defs/none"
SWITCH = "x-trainspec-switch"
LAZY = "x-trainspec-lazy"
LAZY_TYPE = "trainspec.config_model.LazyTable"
# Keys that only constrain one JSON type; a member {type: T, <these>} merges with {type: null}.
_SIMPLE = {
    "type",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "pattern",
    "minLength",
    "maxLength",
}


def _types(member: dict[str, Any]) -> list[str]:
    kind = member.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


def _without_conventions(node: dict[str, Any]) -> dict[str, Any]:
    members = node.get("anyOf")
    if members is None:
        return node
    kept = [m for m in members if m.get("$ref") != NONE_REF]
    if node.get(SWITCH):
        switched = [m for m in kept if "boolean" in _types(m)]
        if len(switched) != 1:
            raise ValueError(f"{SWITCH} needs exactly one boolean member, got {members}")
        member = switched[0]
        rest = [t for t in _types(member) if t != "boolean"]
        kept = [m for m in kept if m is not member] + ([{"type": rest[0]}] if rest else [])
    if kept and all(set(m) <= _SIMPLE for m in kept):
        constrained = [m for m in kept if m != {"type": "null"}]
        if len(constrained) == 1:  # {type: T, bounds} | null  ->  {type: [T, null], bounds}
            merged = dict(constrained[0])
            types = _types(merged) + (["null"] if len(kept) > 1 else [])
            merged["type"] = types[0] if len(types) == 1 else types
            kept = [merged]
    out = {key: value for key, value in node.items() if key != "anyOf"}
    if len(kept) == 1:
        return {**out, **kept[0]}
    return {**out, "anyOf": [_named(member) for member in kept]}


_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _named(member: dict[str, Any]) -> dict[str, Any]:
    """A bounded number inside a union ("ep": an integer >= 1 or "auto") becomes a named type
    alias in the classes; give it a name that says what it is (PositiveInt), not the field's."""
    if not (set(member) <= _SIMPLE and any(bound in member for bound in _BOUNDS)):
        return member
    number = {"integer": "Int", "number": "Float"}.get(member.get("type"), "")
    if set(member) == {"type", "minimum"} and member["minimum"] in (0, 1) and number:
        return {
            **member,
            "title": ("NonNegative" if member["minimum"] == 0 else "Positive") + number,
        }
    return {**member, "title": f"Bounded{number}"}


def _walk(node: Any) -> Any:
    if isinstance(node, list):
        return [_walk(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _walk(value) for key, value in node.items()}
    return _without_conventions(node)


def _refers_to(node: Any, target: str) -> bool:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(target):
            return True
        return any(_refers_to(value, target) for value in node.values())
    if isinstance(node, list):
        return any(_refers_to(item, target) for item in node)
    return False


def view(schema_dir: Path, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    documents = {
        path.name: _walk(json.loads(path.read_text())) for path in sorted(schema_dir.glob("*.json"))
    }
    common = documents.get("common.json")
    if common is not None:
        common.get("$defs", {}).pop("none", None)
        if not common.get("$defs") and not any(
            _refers_to(doc, "common.json") for doc in documents.values()
        ):
            del documents["common.json"]  # nothing left to generate from it
    for name, document in documents.items():
        (out_dir / name).write_text(json.dumps(document, indent=2) + "\n")


def _lazy(node: Any, titles: dict[str, str], where: str) -> Any:
    if isinstance(node, list):
        return [_lazy(item, titles, where) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _lazy(value, titles, where) for key, value in node.items()}
    if node.get(LAZY) is not True:
        return node
    members = node.get("anyOf", [node])
    refs = [m for m in members if "$ref" in m]
    file = refs[0]["$ref"] if len(refs) == 1 else ""
    if file not in titles:
        raise ValueError(f"{where}: {LAZY} needs one $ref to a whole schema file, got {members}")
    tag = f"{file.removesuffix('.json')}:{titles[file]}"
    typed = [{"customTypePath": LAZY_TYPE} if m is refs[0] else m for m in members]
    rest = {key: value for key, value in node.items() if key not in ("anyOf", "$ref")}
    return {**rest, LAZY: tag, **({"anyOf": typed} if "anyOf" in node else typed[0])}


def lazy_tables(out_dir: Path) -> None:
    """Rewrite the view in out_dir for the generator: each x-trainspec-lazy table typed
    LazyTable, its x-trainspec-lazy naming the module and class to load."""
    paths = sorted(out_dir.glob("*.json"))
    documents = {path.name: json.loads(path.read_text()) for path in paths}
    titles = {name: doc["title"] for name, doc in documents.items() if "title" in doc}
    for name, document in documents.items():
        lazy = _lazy(document, titles, name)
        if lazy != document:
            (out_dir / name).write_text(json.dumps(lazy, indent=2) + "\n")
