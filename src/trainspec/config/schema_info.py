"""What the bundled schema says about each key: for override flags, suggestions and --help.

Built once per kind by walking the bundle that `make gen` writes (generated/schemas/), only when
a report, an override or --help needs it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from trainspec.schema_walk import branches, objects, resolve_ref, tag_key

from .bundle import SCHEMA_NAMES, bundled_schema

KeyPath = tuple[str, ...]
NO_DEFAULT = object()
__all__ = ["NO_DEFAULT", "SCHEMA_NAMES", "KeyInfo", "SchemaInfo", "bundled_schema", "schema_info"]


@dataclass(slots=True)
class KeyInfo:
    """One key of the config tree (merged over union variants)."""

    path: KeyPath
    description: str = ""
    default: Any = NO_DEFAULT
    types: set[str] = field(default_factory=set)  # JSON types; "object" for a sub-table
    choices: list[Any] = field(default_factory=list)  # enum / const values
    required: bool = False
    property_names: dict[str, Any] | None = None  # a schema every key of this table must match
    free_values: dict[str, Any] | None = None  # a free-form table: the schema of its values
    items: KeyInfo | None = None  # an array: what each item takes
    renamed_to: str | None = None  # an old name (x-trainspec-renamed): the key's new name
    bounds: list[str] = field(default_factory=list)  # ">= 0", "in (0, 1)": one per branch
    auto: dict[str, Any] | None = None  # an "auto" setting: kind -> what it becomes
    # a key of several union variants: variant tag -> its default there (they may differ)
    variant_defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def limits(self) -> str:
        """The bounds in words ("" when the key has none)."""
        return " or ".join(self.bounds)

    def defaults_by_value(self) -> list[tuple[Any, list[str]]]:
        """(default, the variants with it) when the variants that have this key give it
        different defaults; [] when they agree."""
        groups: dict[str, tuple[Any, list[str]]] = {}
        for tag, value in self.variant_defaults.items():
            text = "<required>" if value is NO_DEFAULT else json.dumps(value, sort_keys=True)
            groups.setdefault(text, (value, []))[1].append(tag)
        return list(groups.values()) if len(groups) > 1 else []

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def is_table(self) -> bool:
        return "object" in self.types

    @property
    def is_switch(self) -> bool:
        """A key that a bare `--flag` / `--no-flag` can set: a boolean or an optional table."""
        return "boolean" in self.types or (self.is_table and "null" in self.types)

    def accepts_type(self, value: Any) -> bool:
        kind = json_type(value)
        return (
            kind in self.types
            or (kind == "integer" and "number" in self.types)
            or (value in self.choices)
        )

    def expected(self) -> str:
        """What this key takes, in words: 'an integer or "None"'."""
        words = [_ARTICLES[t] for t in _TYPE_ORDER if t in self.types and t != "null"]
        if "array" in self.types and self.items is not None and self.items.expected():
            item = self.items.expected()
            plural = _PLURALS.get(item, f"({item})")
            words[words.index(_ARTICLES["array"])] = f"an array of {plural}"
        if self.choices and len(self.choices) <= 8:
            words += [json.dumps(choice) for choice in self.choices]
        elif self.choices:
            words.append("one of " + ", ".join(json.dumps(c) for c in self.choices))
        if len(words) <= 1:
            return "".join(words)
        return ", ".join(words[:-1]) + " or " + words[-1]


class SchemaInfo:
    def __init__(self, schema: dict[str, Any], kind: str | None = None) -> None:
        self.schema = schema
        self.kind = kind  # the config kind whose bundle this is (None: a part of one)
        self.keys: dict[KeyPath, KeyInfo] = {}
        self.children: dict[KeyPath, list[str]] = {(): []}
        self.variants: dict[KeyPath, dict[str, list[str]]] = {}  # union path → tag → its keys
        self.tag_keys: dict[KeyPath, str] = {}  # union path → the key its tag is ("type", "name")
        # keys of the reference that trainspec leaves out, with the reason: a table's
        # x-trainspec-unsupported, by the key's path
        self.unsupported: dict[KeyPath, str] = {}
        self._walk(schema, (), set())

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        return resolve_ref(self.schema, node)

    def _describe(self, info: KeyInfo, node: dict[str, Any]) -> None:
        node = self.resolve(node)
        limits = bound_text(node)
        if limits and limits not in info.bounds:
            info.bounds.append(limits)
        if "x-trainspec-auto" in node:
            info.auto = node["x-trainspec-auto"]
        if "propertyNames" in node:
            info.property_names = node["propertyNames"]
        if isinstance(node.get("items"), dict):
            info.items = info.items or KeyInfo((*info.path, "*"))
            self._describe(info.items, node["items"])
        if node.get("type") == "object" and "properties" not in node:
            extra = node.get("additionalProperties", {})
            info.free_values = extra if isinstance(extra, dict) else None
        kinds = node.get("type")
        if isinstance(kinds, str):
            info.types.add(kinds)
        elif isinstance(kinds, list):
            info.types.update(kinds)
        if "properties" in node or "allOf" in node:
            info.types.add("object")
        if "const" in node and node["const"] not in info.choices:
            info.choices.append(node["const"])
        for value in node.get("enum", []):
            if value not in info.choices:
                info.choices.append(value)
        for key in ("anyOf", "oneOf"):
            for branch in node.get(key, []):
                self._describe(info, branch)

    def _walk(self, node: dict[str, Any], path: KeyPath, seen: set[int]) -> None:
        resolved = self.resolve(node)
        shapes = objects(self.schema, resolved)
        union = resolved.get("oneOf") or []
        for branch in resolved.get("anyOf", []):  # a nullable union: anyOf [union, null, ...]
            union = union or self.resolve(branch).get("oneOf") or []
        if len(union) > 1 and all(
            "properties" in self.resolve(b) or "allOf" in self.resolve(b) for b in union
        ):
            key = tag_key(self.schema, resolved)
            tags = {}
            for branch in union:
                for shape in objects(self.schema, branch, key):
                    if shape.tag is not None:
                        tags[shape.tag] = list(shape.properties)
            if tags:
                self.variants[path] = tags
                self.tag_keys[path] = key
        for branch in branches(self.schema, resolved):
            for name, why in branch.get("x-trainspec-unsupported", {}).items():
                self.unsupported[(*path, name)] = why
        names = self.children.setdefault(path, [])
        for shape in shapes:
            for name, prop in shape.properties.items():
                child = (*path, name)
                if name not in names:
                    names.append(name)
                info = self.keys.get(child)
                if info is None:
                    info = self.keys[child] = KeyInfo(child)
                    info.description = prop.get("description", "")
                    info.default = prop.get("default", NO_DEFAULT)
                    info.renamed_to = prop.get("x-trainspec-renamed-to")
                info.required = info.required or name in shape.required
                if shape.tag is not None and path in self.variants and name != self.tag_of(path):
                    info.variant_defaults[shape.tag] = prop.get("default", NO_DEFAULT)
                self._describe(info, prop)
                if id(prop) not in seen:
                    self._walk(prop, child, seen | {id(prop)})

    def tag_of(self, path: KeyPath) -> str:
        """The key that picks the variant of the union at `path` ("type" unless it says)."""
        return self.tag_keys.get(path, "type")

    def known(self, path: KeyPath) -> bool:
        return path in self.keys

    def free_table(self, path: KeyPath) -> KeyInfo | None:
        """The free-form table (env_vars, loss.kwargs) that `path` is a key of, if any."""
        parent = self.keys.get(path[:-1])
        return parent if parent is not None and parent.free_values is not None else None

    def where(self, name: str) -> list[KeyPath]:
        """Every path whose last key is `name` (for "this key belongs under [section]")."""
        return [path for path in self.keys if path[-1] == name]

    def scope(self, path: tuple[Any, ...]) -> tuple[SchemaInfo, KeyPath]:
        """(what describes `path`, its key path there): a path inside a table of an array of
        tables (`train.source.0.env.timeout`) is described by the array's tables
        (`env.timeout` of [[train.source]]); any other path by this schema."""
        info, start = self, 0
        for index, part in enumerate(path):
            if isinstance(part, int):
                inner = info._items(tuple(p for p in path[start:index] if isinstance(p, str)))
                if inner is not None:
                    info, start = inner, index + 1
        return info, tuple(p for p in path[start:] if isinstance(p, str))

    def _items(self, array: KeyPath) -> SchemaInfo | None:
        """The schema of the tables of the array of tables at `array` (None for another key)."""
        key = self.keys.get(array)
        if key is None or key.items is None or not key.items.is_table:
            return None
        cache: dict[KeyPath, SchemaInfo] = self.__dict__.setdefault("_item_infos", {})
        if array not in cache:
            node = self.schema
            for part in array:
                node = self.resolve(node)
                properties: dict[str, Any] = {}
                for shape in objects(self.schema, node):
                    properties.update(shape.properties)
                node = self.resolve(properties[part])
            branches = [node, *(self.resolve(b) for b in node.get("anyOf", []))]
            items = next(b["items"] for b in branches if "items" in b)
            defs = self.schema.get("$defs", {})
            cache[array] = SchemaInfo({"$defs": defs, **self.resolve(items)})
        return cache[array]


_TYPE_ORDER = ("object", "array", "boolean", "integer", "number", "string", "null")
_ARTICLES = {
    "object": "a table",
    "array": "an array",
    "boolean": "true or false",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "null": "null",
}
_PLURALS = {
    "a string": "strings",
    "an integer": "integers",
    "a number": "numbers",
    "true or false": "booleans",
}


def json_type(value: Any) -> str:
    """The JSON Schema type of a Python value read from TOML or JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string" if isinstance(value, str) else "object"


@functools.cache
def schema_info(kind: str) -> SchemaInfo:
    return SchemaInfo(bundled_schema(kind), kind)


def bound_text(node: dict[str, Any]) -> str | None:
    """A schema node's numeric bounds in words: `>= 0`, `> 0`, `in [1, 65535]`, `in (0, 1)`."""
    low, low_open = node.get("minimum"), False
    if "exclusiveMinimum" in node:
        low, low_open = node["exclusiveMinimum"], True
    high, high_open = node.get("maximum"), False
    if "exclusiveMaximum" in node:
        high, high_open = node["exclusiveMaximum"], True
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{json.dumps(low)}, {json.dumps(high)}" + (
            ")" if high_open else "]"
        )
    if low is not None:
        return f"{'>' if low_open else '>='} {json.dumps(low)}"
    if high is not None:
        return f"{'<' if high_open else '<='} {json.dumps(high)}"
    return None
