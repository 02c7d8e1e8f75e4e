"""Reading a JSON Schema the way trainspec writes them: local `$ref`s, `anyOf`/`oneOf` for the
alternatives of a value, `allOf` for a table that extends another, and a const tag for the
variant of a union: `type`, or the property the union's `discriminator` names (`name` for
[renderer]).

One walker for everything that reads the schema: the key table behind suggestions, flags and
--help (schema_info), the bundler's flattening, the parity proof's facts, the docs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def resolve_ref(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with its local `$ref` (``#/$defs/...``) followed, sibling keywords kept."""
    while "$ref" in node:
        target: Any = root
        for part in node["$ref"].removeprefix("#").strip("/").split("/"):
            if part:
                target = target[part.replace("~1", "/").replace("~0", "~")]
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return node


def branches(root: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a value may take (anyOf/oneOf flattened, refs followed), each without
    its own anyOf/oneOf."""
    node = resolve_ref(root, node)
    found = []
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, []):
            found += branches(root, branch)
    rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
    if not found or any(k in rest for k in ("type", "const", "enum", "properties", "allOf")):
        found.append(rest)
    return found


def tag_key(root: dict[str, Any], node: dict[str, Any]) -> str:
    """The property whose const selects a variant of the union `node` ("type" by default)."""
    found = resolve_ref(root, node).get("discriminator", {}).get("propertyName")
    if found is None:
        for branch in resolve_ref(root, node).get("anyOf", []):  # a nullable union
            found = found or resolve_ref(root, branch).get("discriminator", {}).get("propertyName")
    return found if isinstance(found, str) else "type"


@dataclass
class ObjectSchema:
    """One table shape a value may take: its properties (allOf parents merged in, the child's
    own last), the required names, and the tag that selects it in a union."""

    properties: dict[str, Any] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    tag: Any = None


def objects(
    root: dict[str, Any], node: dict[str, Any], key: str | None = None
) -> list[ObjectSchema]:
    """Every table shape among the alternatives of `node`, tagged by `key` (by default the
    union's discriminator)."""
    key = key or tag_key(root, node)
    found = []
    for branch in branches(root, node):
        if not ("properties" in branch or "allOf" in branch or branch.get("type") == "object"):
            continue
        shape = ObjectSchema()
        for part in branch.get("allOf", []):
            for parent in objects(root, part):
                shape.properties.update(parent.properties)
                shape.required += parent.required
        shape.properties.update(branch.get("properties", {}))
        shape.required += branch.get("required", [])
        shape.tag = resolve_ref(root, shape.properties.get(key, {})).get("const")
        found.append(shape)
    return found
