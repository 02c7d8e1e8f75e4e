"""Hypothesis strategies for documents a JSON Schema accepts, built from the schema itself.

hypothesis-jsonschema would be the library for this, but its last release (0.23.1) no longer
runs with current Hypothesis (`'many' object has no attribute 'more'`) and cannot resolve a
bundle with an `$id`; this covers the keywords trainspec's schemas use.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from trainspec.config.bundle import resolve_ref

INT64 = (-(2**63), 2**63 - 1)


def strategy(root: dict[str, Any], node: dict[str, Any] | None = None, depth: int = 0):
    node = resolve_ref(root, root if node is None else node)
    alternatives = node.get("anyOf") or node.get("oneOf")
    if alternatives:
        return st.one_of([strategy(root, branch, depth) for branch in alternatives])
    if "const" in node:
        return st.just(node["const"])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    kinds = node.get("type")
    if isinstance(kinds, list):
        return st.one_of([strategy(root, {**node, "type": kind}, depth) for kind in kinds])
    if kinds == "object" or "properties" in node:
        return _object(root, node, depth)
    if kinds == "array":
        items = node.get("items", {})
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


def _object(root: dict[str, Any], node: dict[str, Any], depth: int):
    properties = {
        name: prop
        for name, prop in node.get("properties", {}).items()
        if not (isinstance(prop, dict) and prop.get("not") == {})  # renamed keys accept nothing
    }
    required = set(node.get("required", []))
    if not properties and isinstance(node.get("additionalProperties"), dict):
        values = strategy(root, node["additionalProperties"], depth + 1)
        keys = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_", min_size=1, max_size=8)
        return st.dictionaries(keys, values, max_size=3)
    if depth > 8:
        return st.fixed_dictionaries({})
    return st.fixed_dictionaries(
        {
            name: strategy(root, prop, depth + 1)
            for name, prop in properties.items()
            if name in required
        },
        optional={
            name: strategy(root, prop, depth + 1)
            for name, prop in properties.items()
            if name not in required
        },
    )
