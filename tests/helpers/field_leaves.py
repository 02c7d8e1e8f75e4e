"""The leaves of a config schema that the field-coverage tests hold to account, the keys inside
arrays of tables included (`eval.source[].interval`). Used by test_field_coverage.py (SFT) and
rl/test_rl_field_coverage.py."""

from __future__ import annotations

from trainspec.config.schema_info import SchemaInfo


def item_leaves(schema: SchemaInfo, array: tuple[str, ...]) -> list[str]:
    """The leaves inside the tables of an array of tables (`train.source[].ratio`)."""
    node = schema.schema
    for part in array:
        node = schema.resolve(node)
        properties = {}
        for branch in [node, *node.get("anyOf", []), *node.get("allOf", [])]:
            branch = schema.resolve(branch)
            properties.update(branch.get("properties", {}))
            for inner in branch.get("allOf", []):  # a table that extends a base ($defs)
                properties.update(schema.resolve(inner).get("properties", {}))
        node = schema.resolve(properties[part])
    items = next(schema.resolve(b)["items"] for b in [node, *node.get("anyOf", [])] if "items" in b)
    inner = SchemaInfo({"$defs": schema.schema.get("$defs", {}), **schema.resolve(items)})
    prefix = ".".join(array) + "[]."
    return [prefix + ".".join(p) for p in inner.keys if not inner.children.get(p)]


def leaves_of(schema: SchemaInfo) -> list[str]:
    """Every leaf of the schema, and the leaves of the tables of its arrays of tables."""
    out = []
    for path, info in schema.keys.items():
        if not schema.children.get(path):
            out.append(".".join(path))
            if info.items is not None and "object" in info.items.types:
                out += item_leaves(schema, path)
    return sorted(out)
