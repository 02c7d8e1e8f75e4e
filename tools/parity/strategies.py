"""Hypothesis strategies for documents a JSON Schema accepts, built from the schema itself.

hypothesis-jsonschema would be the library for this, but its last release (0.23.1) no longer
runs with current Hypothesis (`'many' object has no attribute 'more'`) and cannot resolve a
bundle with an `$id`; this covers the keywords trainspec's schemas use.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import strategies as st

from trainspec.config.bundle import resolve_ref
from trainspec.schema_walk import branches, objects, tag_key

INT64 = (-(2**63), 2**63 - 1)


def strategy(root: dict[str, Any], node: dict[str, Any] | None = None, depth: int = 0, aim=None):
    """Values `node` accepts. `aim`, (tag, steps), narrows them to those that hold a table: the
    value is that table (a variant of it when `tag` is set), or, with steps left, leads to it
    through them ((key, tag) each; key "*" is a list's items or a map's values, see `aim_at`)."""
    node = resolve_ref(root, root if node is None else node)
    alternatives = node.get("anyOf") or node.get("oneOf")
    if alternatives:
        if aim is not None:  # the variants' tag is read at the union (its discriminator)
            key = tag_key(root, node)
            alternatives = [branch for branch in alternatives if _fits(root, branch, aim, key)]
        return st.one_of([strategy(root, branch, depth, aim) for branch in alternatives])
    kinds = node.get("type")
    if aim is not None:
        if not _fits(root, node, (None, aim[1])):  # the union above it checked the tag
            return st.nothing()
        if isinstance(kinds, list):
            kinds = "array" if _needs_item(aim) and "array" in kinds else "object"
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if isinstance(kinds, list):
        return st.one_of([strategy(root, {**node, "type": kind}, depth) for kind in kinds])
    if kinds == "object" or "properties" in node:
        return _object(root, node, depth, aim)
    if kinds == "array":
        items = node.get("items", {})
        if aim is not None:  # at least one item, each holding the table
            return st.lists(strategy(root, items, depth + 1, _past(aim)), min_size=1, max_size=2)
        return st.lists(strategy(root, items, depth + 1), max_size=3)
    if kinds == "integer":
        low = node.get("minimum", INT64[0])
        high = node.get("maximum", INT64[1])
        return st.integers(int(low), int(high))
    if kinds == "number":
        low = node.get("minimum", node.get("exclusiveMinimum"))
        high = node.get("maximum", node.get("exclusiveMaximum"))
        return st.floats(
            min_value=low,
            max_value=high,
            exclude_min="exclusiveMinimum" in node,
            exclude_max="exclusiveMaximum" in node,
            allow_nan=False,
            allow_infinity=False,
        )
    if kinds == "boolean":
        return st.booleans()
    if kinds == "null":
        return st.none()
    if kinds == "string" and "pattern" in node:
        return st.from_regex(node["pattern"])  # JSON Schema patterns search, as from_regex does
    if kinds == "string":
        return st.text(max_size=12)
    return st.nothing()


def aim_at(table: str):
    """The aim (see `strategy`) at a table named as the parity facts name it: `optim[muon]`,
    `eval.source.*.sampling` ("*": the items of a list or the values of a map), "" for the
    whole document."""
    steps = tuple((key, tag or None) for key, tag in STEP.findall(table))
    return None, steps


STEP = re.compile(r"([^.\[\]]+)(?:\[([^\]]*)\])?")


def _needs_item(aim) -> bool:
    """Whether the table is in an item of a list or a value of a map here ("*")."""
    return bool(aim[1]) and aim[1][0][0] == "*"


def _past(aim):
    """The aim one step on: from a key (or "*") to its value."""
    return aim[1][0][1], aim[1][1:]


def _map_values(node: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of a map's values (a table whose keys are yours: stops, env_vars)."""
    values = node.get("additionalProperties")
    return values if isinstance(values, dict) and not node.get("properties") else None


def _fits(root: dict[str, Any], node: dict[str, Any], aim, key: str | None = None) -> bool:
    """Whether a value of `node` can hold the table `aim` leads to (`key`: the union's tag)."""
    if _needs_item(aim):
        return any(
            "array" in _types(branch) or _map_values(branch) is not None
            for branch in branches(root, node)
        )
    if aim[0] is None:
        return any(
            "object" in _types(branch) or "properties" in branch or "allOf" in branch
            for branch in branches(root, node)
        )
    return any(str(shape.tag) == aim[0] for shape in objects(root, node, key))


def _types(node: dict[str, Any]) -> list[str]:
    kinds = node.get("type")
    return [kinds] if isinstance(kinds, str) else kinds or []


def _object(root: dict[str, Any], node: dict[str, Any], depth: int, aim=None):
    properties = {
        name: prop
        for name, prop in node.get("properties", {}).items()
        if not (isinstance(prop, dict) and prop.get("not") == {})  # renamed keys accept nothing
    }
    required = set(node.get("required", [])) | ({aim[1][0][0]} if aim and aim[1] else set())
    if not properties and isinstance(node.get("additionalProperties"), dict):
        aimed = aim is not None and _needs_item(aim)  # at least one value, holding the table
        values = strategy(
            root, node["additionalProperties"], depth + 1, _past(aim) if aimed else None
        )
        keys = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=8)
        return st.dictionaries(keys, values, min_size=int(aimed), max_size=3)
    toward = aim[1][0][0] if aim and aim[1] else None  # the key that leads on to the table
    if aim and aim[0] is not None:  # a variant: its tag written, not left to the default
        required |= {name for name, prop in properties.items() if _const(root, prop) == aim[0]}
    if depth > 8 and toward is None:
        return st.fixed_dictionaries({})

    def value(name: str, prop: dict[str, Any]):
        if name == toward:
            return strategy(root, prop, depth + 1, _past(aim))
        return strategy(root, prop, depth + 1)

    return st.fixed_dictionaries(
        {name: value(name, prop) for name, prop in properties.items() if name in required},
        optional={
            name: value(name, prop) for name, prop in properties.items() if name not in required
        },
    )


def _const(root: dict[str, Any], prop: Any) -> str | None:
    if not isinstance(prop, dict) or "const" not in resolve_ref(root, prop):
        return None
    return str(resolve_ref(root, prop)["const"])
