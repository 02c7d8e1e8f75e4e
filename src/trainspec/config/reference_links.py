"""Where the config reference (docs/reference/, written by `make gen`) describes a key: one page
per command, named by the command, and on it an anchor per key whose id is the key's dotted
path, with the indices of arrays left out.

    page("sft")                                   # "docs/reference/sft.md"
    link("sft", ("optim", "lr"))                  # "docs/reference/sft.md#optim.lr"
    link("orchestrator", ("eval", "source", 0, "name"))  # "...orchestrator.md#eval.source.name"
    link("rl_run", ("trainer", "optim", "lr"))    # "docs/reference/rl-trainer.md#optim.lr"

A table that holds another command's whole config (`[trainer]` of the `rl` command's config is
an rl-trainer config) is described on that command's page, and its keys link there. A key the
reference does not list (an entry of a free-form table such as env_vars.FOO) links to the
nearest table above it that it does. The generator (scripts/gen_docs.py) writes the pages from
the same walk, so every link made here names an anchor that exists.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from trainspec.kinds import KIND_INFO, Kind, kind_of_schema

from .schema_info import KeyPath, SchemaInfo, schema_info

REFERENCE_DIR = "docs/reference"
DEFS = "#/$defs/"


def page_name(kind: Kind) -> str:
    """The file of `kind`'s page: the command's name (`rl-trainer.md`)."""
    return f"{KIND_INFO[kind].command}.md"


def page(kind: Kind) -> str:
    return f"{REFERENCE_DIR}/{page_name(kind)}"


def anchor(path: tuple[Any, ...]) -> str:
    """The id of a key's anchor: its dotted path without array indices (`eval.source.name`)."""
    return ".".join(part for part in path if isinstance(part, str))


def embedded(schema: dict[str, Any]) -> dict[str, Kind]:
    """Top-level tables of `schema` that are another kind's whole config (a `$ref` to that
    kind's schema in the bundle), by name: {"trainer": "rl", "orchestrator": "orchestrator"}."""
    found: dict[str, Kind] = {}
    for name, prop in schema.get("properties", {}).items():
        ref = prop.get("$ref", "") if isinstance(prop, dict) else ""
        schema_name = ref.removeprefix(DEFS)  # a whole bundled schema, not a definition in one
        whole = ref.startswith(DEFS) and "/" not in schema_name
        kind = kind_of_schema(schema_name) if whole else None
        if kind is not None:
            found[name] = kind
    return found


def reference_keys(info: SchemaInfo) -> Iterator[KeyPath]:
    """Every key a page lists, in schema order: the keys of `info`, the keys of the tables of
    each array of tables after the array (`eval.source.name`), and of an embedded config only
    its table (its keys are on its own page)."""
    inside = embedded(info.schema)
    for path, key in info.keys.items():
        if len(path) > 1 and path[0] in inside:
            continue
        yield path
        if key.items is not None and key.items.is_table:
            items, _ = info.scope((*path, 0))
            for inner in reference_keys(items):
                yield (*path, *inner)


def target(
    kind: Kind, path: tuple[Any, ...], schema: dict[str, Any] | None = None
) -> tuple[Kind, KeyPath]:
    """The kind whose page describes `path` of a `kind` config, and the path there: another
    kind's, for a key inside an embedded config (`trainer.optim.lr` is rl's `optim.lr`)."""
    keys = tuple(part for part in path if isinstance(part, str))
    inside = embedded(schema if schema is not None else schema_info(kind).schema)
    if len(keys) > 1 and keys[0] in inside:
        return target(inside[keys[0]], keys[1:])
    return kind, keys


@functools.cache
def anchors(kind: Kind) -> frozenset[str]:
    """The ids of the key anchors on `kind`'s page."""
    return frozenset(anchor(path) for path in reference_keys(schema_info(kind)))


def link(kind: Kind, path: tuple[Any, ...]) -> str:
    """The page and anchor that describe `path` of a `kind` config (the page alone when no
    table of the path is listed)."""
    kind, keys = target(kind, path)
    while keys and anchor(keys) not in anchors(kind):
        keys = keys[:-1]
    return f"{page(kind)}#{anchor(keys)}" if keys else page(kind)
