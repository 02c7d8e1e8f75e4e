"""Planning and making migrate-config's renames in a config's text, with nothing else changed.

The renames come from the schema (the `x-trainspec-renamed` maps of schema/*.json, which the
bundle turns into deprecated keys with `x-trainspec-renamed-to`); nothing is hard-coded here.
tomlkit re-renders the document with only the renamed key tokens changed, and the result is
checked before anyone writes it: it must read back (tomllib) as the renamed config and differ
from the original only on the renamed keys' lines, else CannotRewrite. No file is touched here:
migrate_config.py reads and writes, safe_write.py makes the write durable.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from trainspec.config.positions import index_positions
from trainspec.config.schema_info import schema_info
from trainspec.issues import BARE_KEY, dotted

TablePath = tuple[str, ...]


class CannotRewrite(Exception):
    """The file cannot be rewritten with only the renamed keys changed; it is left alone."""


@dataclass(frozen=True, slots=True)
class RenameTable:
    """What a kind's schema renames: table path → {old key: new key}, and the keys of each
    variant of a union table (a `type = "multi_node"` table only renames multi_node's keys)."""

    renames: dict[TablePath, dict[str, str]]
    variants: dict[TablePath, dict[str, list[str]]] = field(default_factory=dict)


def renames_for(kind: str) -> RenameTable:
    """What `kind`'s schema renames. A chain (a renamed to b, later b to c) goes straight to its
    last name, so one run migrates a file written for any older schema."""
    info = schema_info(kind)
    renames: dict[TablePath, dict[str, str]] = {}
    for path, key in info.keys.items():
        if key.renamed_to:
            renames.setdefault(path[:-1], {})[path[-1]] = key.renamed_to
    for mapping in renames.values():  # a → b and b → c: a goes straight to c
        for old in list(mapping):
            new, seen = mapping[old], {old}
            while new in mapping and new not in seen:
                seen.add(new)
                new = mapping[new]
            mapping[old] = new
    variants = {path: info.variants[path] for path in renames if path in info.variants}
    return RenameTable(renames, variants)


@dataclass(frozen=True, slots=True)
class Rename:
    table: TablePath
    old: str
    new: str

    @property
    def path(self) -> TablePath:
        return (*self.table, self.old)

    def describe(self) -> str:
        return f"{dotted(self.path)} -> {dotted((*self.table, self.new))}"


@dataclass(frozen=True, slots=True)
class Conflict:
    table: TablePath
    old: str
    new: str
    other: str  # the key in the way: `new` itself, or another old key that takes `new`


def plan(data: dict[str, Any], rules: RenameTable) -> tuple[list[Rename], list[Conflict]]:
    """The renames a parsed document needs, and the tables where they would clash."""
    renames: list[Rename] = []
    conflicts: list[Conflict] = []
    for table_path, mapping in rules.renames.items():
        table = _table_at(data, table_path)
        if table is None:
            continue
        tag = table.get("type")
        variant = rules.variants.get(table_path, {}).get(tag) if isinstance(tag, str) else None
        claimed: dict[str, str] = {}  # new name → the old key that takes it
        for old, new in mapping.items():
            if old not in table or (variant is not None and old not in variant):
                continue  # not there, or not a key of this variant (validation reports it)
            if new in table:
                conflicts.append(Conflict(table_path, old, new, new))
            elif new in claimed:
                conflicts.append(Conflict(table_path, old, new, claimed[new]))
            else:
                claimed[new] = old
                renames.append(Rename(table_path, old, new))
    return renames, conflicts


def _table_at(data: Any, path: TablePath) -> dict[str, Any] | None:
    for part in path:
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data if isinstance(data, dict) else None


def migrate_text(
    text: str, data: dict[str, Any], rules: RenameTable
) -> tuple[str, list[Rename], list[Conflict]]:
    """The file's text with the renames applied (unchanged when there is a conflict), the
    renames and the conflicts. `data` is what tomllib reads from `text`. Raises CannotRewrite
    when the renames cannot be made without changing anything else."""
    renames, conflicts = plan(data, rules)
    if conflicts or not renames:
        return text, renames, conflicts
    new_text = rewrite(text, renames)
    _verify(text, new_text, data, renames, index_positions(text.encode("utf-8")))
    return new_text, renames, conflicts


# ---------------------------------------------------------------------------------------------
# Rewriting with tomlkit: only the key tokens change


def rewrite(text: str, renames: Sequence[Rename]) -> str:
    """`text` with each rename applied to every place its key is written (a key, a dotted-key
    part, an inline-table key, a [table] or [[array]] header part); raises CannotRewrite if
    that cannot be done without touching anything else."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    if not renames:
        return text
    try:
        document = tomlkit.parse(text)
        if document.as_string() != text:
            raise CannotRewrite("tomlkit does not reproduce this file exactly")
        _rename_in(document, (), {rename.path: rename.new for rename in renames})
        return document.as_string()
    except RecursionError:
        raise CannotRewrite("it nests tables too deeply for tomlkit") from None
    except ParseError as err:
        raise CannotRewrite(f"tomlkit cannot parse it ({err})") from None


def _rename_in(container, path: tuple[str | int, ...], targets: dict[TablePath, str]) -> None:
    from tomlkit.items import AoT, InlineTable, SingleKey, Table

    for key, item in container.body:
        if key is None:
            continue  # a comment or whitespace
        if not isinstance(key, SingleKey):  # the parser splits dotted keys; be sure of it
            if any(target[: len(path) + 1] == (*path, key.key) for target in targets):
                raise CannotRewrite(f"unexpected key {key.as_string()!r}")
            continue
        here = (*path, key.key)
        if here in targets:  # a path with an array index is never a target
            _rename_key(key, targets[cast(TablePath, here)])
        if isinstance(item, Table):
            _rename_header(item, here, targets)
            _rename_in(item.value, here, targets)
        elif isinstance(item, InlineTable):
            _rename_in(item.value, here, targets)
        elif isinstance(item, AoT):
            for index, element in enumerate(item.body):
                _rename_header(element, (*here, index), targets)
                _rename_in(element.value, (*here, index), targets)


def _rename_key(key, new: str) -> None:
    """Give a parsed key a new name, keeping its quoting and the whitespace around it."""
    original = key.as_string()
    token = original.strip()
    start = original.index(token)
    key._original = original[:start] + _token_like(token, new) + original[start + len(token) :]
    key.key = new


def _rename_header(table, path: tuple[str | int, ...], targets: dict[TablePath, str]) -> None:
    """A [table] header is rendered from its own text (`display_name`), not from the keys."""
    header = table.display_name
    if header is None:
        return
    names = [part for part in path if isinstance(part, str)]
    for depth in range(1, len(path) + 1):
        new = targets.get(path[:depth])  # type: ignore[arg-type]
        if new is None:
            continue
        spans = _key_spans(header)
        index = sum(isinstance(part, str) for part in path[:depth]) - 1
        if len(spans) != len(names):
            raise CannotRewrite(f"cannot read the header [{header}]")
        start, end = spans[index]
        header = header[:start] + _token_like(header[start:end], new) + header[end:]
    table.display_name = header


_KEY_PART = re.compile(r"""[ \t]*([A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')[ \t]*(\.|$)""")


def _key_spans(text: str) -> list[tuple[int, int]]:
    """Where each part of a (dotted) key is written: `a . "b.c"` → the spans of a and "b.c"."""
    spans: list[tuple[int, int]] = []
    position = 0
    while True:
        found = _KEY_PART.match(text, position)
        if found is None:
            raise CannotRewrite(f"cannot read the key {text!r}")
        spans.append(found.span(1))
        position = found.end()
        if found.group(2) != ".":
            return spans


def _token_like(token: str, name: str) -> str:
    """`name` written the way `token` was: bare if it can be, else quoted like the original."""
    if token.startswith("'") and "'" not in name and name.isprintable():
        return f"'{name}'"
    if token.startswith(("'", '"')) or not BARE_KEY.fullmatch(name):
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return name


def _renamed_data(data: Any, renames: Sequence[Rename]) -> Any:
    """What tomllib should read from the rewritten file."""
    by_table: dict[TablePath, dict[str, str]] = {}
    for rename in renames:
        by_table.setdefault(rename.table, {})[rename.old] = rename.new

    def walk(value: Any, path: TablePath) -> Any:
        if not isinstance(value, dict):
            return value
        names = by_table.get(path, {})
        return {names.get(k, k): walk(v, (*path, k)) for k, v in value.items()}

    return walk(data, ())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _verify(text: str, new_text: str, data: Any, renames: Sequence[Rename], index) -> None:
    """The rewrite reads back as the renamed document and changed only the renamed keys' lines."""
    try:
        got = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as err:
        raise CannotRewrite(f"the rewritten text would not be valid TOML ({err})") from None
    if not _same(got, _renamed_data(data, renames)):
        raise CannotRewrite("the rewritten text would not read back as the renamed config")
    before, after = text.split("\n"), new_text.split("\n")
    allowed = {
        position.line
        for path, position in index.keys.items()
        for rename in renames
        if path[: len(rename.path)] == rename.path
    }
    if len(before) != len(after):
        raise CannotRewrite("tomlkit would add or remove lines")
    changed = {n for n, pair in enumerate(zip(before, after, strict=True), 1) if pair[0] != pair[1]}
    if not changed <= allowed:
        raise CannotRewrite("tomlkit would change more than the renamed keys")
