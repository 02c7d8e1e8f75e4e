"""Which kind of config a file is when nothing names it: no --kind, no `#:schema` first line, no
`x.sft.toml` name. The reference's files name no schema (the command they are given to
decides), so `validate-config FILE` reads the keys instead.

A kind fits when its schema, the bundle `make gen` writes, knows every key the files set:
tables and arrays of tables walked, union variants merged, open tables (env_vars, the
environment tables, vLLM's extra arguments) taking any key below them; a plain value where the
kind has only a table (`model = "Qwen/Qwen3-0.6B"`, the eval command's, against the trainers'
[model]), or a table where it has only a plain value, counts as a key that kind lacks. One
fitting kind is the answer, and the keys that the other kinds lack are the reason. Several
fitting kinds are a real ambiguity (`max_steps = 4` alone). When none fits (a typo, or a file of
another tool), a kind is taken only if it holds a key no other kind has and most of the keys, so
the typo is reported as that kind's error; else the kinds closest to the keys are the
candidates. The key sets are the schemas' own, so a key added to a schema counts at once.
Imports JSON and the schema walker only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainspec.kinds import ALL_KINDS, Kind
from trainspec.schema_walk import branches, objects

from .bundle import bundled_schema

KeyPath = tuple[str, ...]  # ("eval", "source", "[]", "name"): "[]" is an item of an array
ITEM = "[]"
__all__ = ["KindGuess", "KeyPath", "dotted_key", "infer_kind", "unknown_keys"]


@dataclass(frozen=True, slots=True)
class KindGuess:
    """What the keys say: `kind` when one kind is told apart, else the `candidates` to choose
    from (none: no kind has any of the keys, so it is not a trainspec config)."""

    kind: Kind | None
    candidates: tuple[Kind, ...]
    # key -> the kinds it rules out (their schemas lack it): the reason `kind` was chosen
    deciding: tuple[tuple[KeyPath, tuple[Kind, ...]], ...] = ()
    # the keys the chosen kind (else every candidate) lacks: errors the check reports
    unknown: tuple[KeyPath, ...] = ()
    keys: tuple[KeyPath, ...] = ()  # the top-level keys the files set, in order

    @property
    def fits(self) -> bool:
        """The chosen kind knows every key the files set."""
        return self.kind is not None and not self.unknown


def dotted_key(path: KeyPath) -> str:
    """`eval.source[].name` for ("eval", "source", "[]", "name")."""
    return ".".join(path).replace(f".{ITEM}", ITEM)


def unknown_keys(kind: Kind, data: dict[str, Any]) -> list[KeyPath]:
    """The keys of `data` that `kind`'s schema does not have, each the outermost one (nothing
    below an unknown key is listed), in the order they are written."""
    schema = bundled_schema(kind)
    found: dict[KeyPath, None] = {}
    _table(schema, [schema], data, (), found)
    return list(found)


def infer_kind(documents: Iterable[dict[str, Any]]) -> KindGuess:
    """The kind the documents (files merged left to right) are, judged by their keys alone."""
    documents = [doc for doc in documents if isinstance(doc, dict)]
    written: dict[KeyPath, None] = {}
    for document in documents:
        _paths(document, (), written)
    unknown: dict[Kind, list[KeyPath]] = {kind: [] for kind in ALL_KINDS}
    for document in documents:
        for kind in ALL_KINDS:
            unknown[kind] += [p for p in unknown_keys(kind, document) if p not in unknown[kind]]
    keys = tuple(path for path in written if len(path) == 1)
    lacking = {kind: [p for p in written if _lacks(unknown[kind], p)] for kind in ALL_KINDS}
    fitting = tuple(kind for kind in ALL_KINDS if not unknown[kind])
    if len(fitting) == 1:
        return _chosen(fitting[0], unknown, keys)
    if fitting:
        return KindGuess(None, fitting, keys=keys)
    # no kind has every key: a typo, keys of two kinds mixed, or not a trainspec config
    known = {kind: len(written) - len(lacking[kind]) for kind in ALL_KINDS}
    if not any(known.values()):
        return KindGuess(None, (), unknown=keys, keys=keys)
    # a kind that has a key no other kind has, and most of the keys: the rest are its typos
    owners = [
        kind for kind in ALL_KINDS if _own_keys(kind, unknown) and known[kind] > len(lacking[kind])
    ]
    pool = owners or [kind for kind in ALL_KINDS if known[kind]]
    fewest = min(len(lacking[kind]) for kind in pool)
    best = tuple(kind for kind in pool if len(lacking[kind]) == fewest)
    if len(best) == 1 and owners:
        return _chosen(best[0], unknown, keys)
    missing = [key for key in unknown[best[0]] if all(_lacks(unknown[k], key) for k in best)]
    return KindGuess(None, best, unknown=tuple(missing), keys=keys)


def _paths(value: Any, path: KeyPath, found: dict[KeyPath, None]) -> None:
    """Every key path of a document, in the order written."""
    if isinstance(value, dict):
        for key, inner in value.items():
            found.setdefault((*path, key))
            _paths(inner, (*path, key), found)
    elif isinstance(value, list):
        for item in value:
            _paths(item, (*path, ITEM), found)


def _lacks(known_not: list[KeyPath], key: KeyPath) -> bool:
    """Whether a kind whose unknown keys are `known_not` lacks `key` (it, or a table above it)."""
    return any(key[:depth] in known_not for depth in range(1, len(key) + 1))


def _told_apart(kind: Kind, unknown: dict[Kind, list[KeyPath]]) -> dict[KeyPath, set[Kind]]:
    """Each key `kind` has that another kind lacks -> the kinds that lack it."""
    rules_out: dict[KeyPath, set[Kind]] = {}
    for key in dict.fromkeys(key for kind in ALL_KINDS for key in unknown[kind]):
        if _lacks(unknown[kind], key):
            continue
        for other in ALL_KINDS:
            if other != kind and _lacks(unknown[other], key):
                rules_out.setdefault(key, set()).add(other)
    return rules_out


def _own_keys(kind: Kind, unknown: dict[Kind, list[KeyPath]]) -> list[KeyPath]:
    """The keys set that `kind` has and every other kind lacks."""
    return [
        key for key, kinds in _told_apart(kind, unknown).items() if len(kinds) == len(ALL_KINDS) - 1
    ]


def _chosen(kind: Kind, unknown: dict[Kind, list[KeyPath]], keys) -> KindGuess:
    """`kind`, with the fewest keys that rule out every other kind it can be told from (the
    shortest key first, then the first written)."""
    rules_out = _told_apart(kind, unknown)
    order = list(rules_out)
    left = set().union(*rules_out.values()) if rules_out else set()
    deciding: list[tuple[KeyPath, tuple[Kind, ...]]] = []
    while left:
        key = max(order, key=lambda k: (len(rules_out[k] & left), -len(k), -order.index(k)))
        ruled = tuple(k for k in ALL_KINDS if k in rules_out[key] & left)
        deciding.append((key, ruled))
        left -= rules_out[key]
    return KindGuess(kind, (kind,), tuple(deciding), tuple(unknown[kind]), keys)


def _table(
    root: dict[str, Any],
    nodes: list[dict[str, Any]],
    data: dict[str, Any],
    path: KeyPath,
    found: dict[KeyPath, None],
) -> None:
    """Record the keys of the table `data` that none of the schema `nodes` (its alternatives)
    has, and walk into the ones they have."""
    shapes = [branch for node in nodes for branch in branches(root, node) if _is_table(branch)]
    tables = [(_properties(root, shape), _is_open(shape)) for shape in shapes]
    for key, value in data.items():
        here = (*path, key)
        inside = [properties[key] for properties, _ in tables if key in properties]
        if any(is_open and key not in properties for properties, is_open in tables):
            continue  # an open table takes any key, and anything below it
        if not inside:
            found.setdefault(here)
            continue
        _value(root, inside, value, here, found)


def _value(root, nodes, value: Any, path: KeyPath, found: dict[KeyPath, None]) -> None:
    shapes = [branch for node in nodes for branch in branches(root, node)]
    if isinstance(value, dict):
        if shapes and all(_is_scalar(branch) for branch in shapes):
            found.setdefault(path)  # a table where the kind has a plain value (eval's model)
            return
        _table(root, nodes, value, path, found)
    elif isinstance(value, list):
        items = [
            branch["items"]
            for node in nodes
            for branch in branches(root, node)
            if isinstance(branch.get("items"), dict)
        ]
        for item in value:
            if items and isinstance(item, dict | list):
                _value(root, items, item, (*path, ITEM), found)
    elif all(_is_table(branch) for branch in shapes):
        found.setdefault(path)  # a plain value where the kind has only a table (eval's model)


def _is_table(node: dict[str, Any]) -> bool:
    return node.get("type") == "object" or "properties" in node or "allOf" in node


def _is_scalar(node: dict[str, Any]) -> bool:
    """A value that is never a table: its type names no object."""
    kind = node.get("type")
    types = [kind] if isinstance(kind, str) else list(kind or [])
    if "const" in node:
        types.append(type(node["const"]).__name__)
    return bool(types) and "object" not in types and "dict" not in types


def _is_open(node: dict[str, Any]) -> bool:
    """A table that takes keys it does not list (JSON Schema's default, unless it says no)."""
    return (
        node.get("additionalProperties", True) is not False
        and node.get("unevaluatedProperties", True) is not False
    )


def _properties(root: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for shape in objects(root, node):
        found.update(shape.properties)
    return found
