"""Where each key and value of a TOML file sits (line and column), from tree-sitter's TOML parser.

tomllib gives the values and decides what is valid TOML; this index only answers "where is
`optim.lr` in this file", for error reports and `--explain`. It is built lazily, only when a
report needs a position.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Position:
    line: int  # 1-based
    column: int  # 1-based, in characters


@dataclass(slots=True)
class PositionIndex:
    values: dict[Path, Position] = field(default_factory=dict)  # where the value starts
    keys: dict[Path, Position] = field(default_factory=dict)  # where the key (or header) starts

    def find(self, path: Path) -> Position | None:
        """Position of the value at `path`, else of its key or table header."""
        return self.values.get(path) or self.keys.get(path)


@functools.cache
def _parser():
    import tree_sitter_toml
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_toml.language()))


def _key_text(node) -> str:
    text = node.text.decode("utf-8", "replace")
    if node.type == "quoted_key":
        return next(iter(tomllib.loads(f"{text} = 0")))
    return text


def _key_parts(node) -> list[str]:
    """The parts of a (possibly dotted) key; iterative, as dotted keys nest one level a part."""
    parts: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type == "dotted_key":
            stack.extend(reversed(current.named_children))
        else:
            parts.append(_key_text(current))
    return parts


class _Indexer:
    def __init__(self, source: bytes) -> None:
        self.lines = source.split(b"\n")
        self.index = PositionIndex()
        self.array_tables: dict[Path, int] = {}

    def position(self, node) -> Position:
        row, col = node.start_point
        line = self.lines[row] if row < len(self.lines) else b""
        return Position(row + 1, len(line[:col].decode("utf-8", "replace")) + 1)

    def mark_key(self, path: Path, node) -> None:
        self.index.keys.setdefault(path, self.position(node))

    def document(self, root) -> None:
        prefix: Path = ()
        for node in root.named_children:
            if node.type == "pair":
                self.pair(prefix, node)
            elif node.type in ("table", "table_array_element"):
                header = node.named_children[0]
                parts = self.resolve(_key_parts(header))
                for depth in range(1, len(parts)):
                    self.mark_key(parts[:depth], header)
                if node.type == "table":
                    prefix = parts
                    self.mark_key(prefix, header)
                else:
                    count = self.array_tables.get(parts, 0)
                    self.array_tables[parts] = count + 1
                    self.mark_key(parts, header)
                    prefix = (*parts, count)
                    self.mark_key(prefix, header)
                for child in node.named_children[1:]:
                    if child.type == "pair":
                        self.pair(prefix, child)

    def resolve(self, parts: list[str]) -> Path:
        """A header's path, each array of tables it passes through given the index of its
        latest table: `[a.b]` after `[[a]]` is `b` of the last table of `a` (as TOML says)."""
        path: list[str | int] = []
        for depth, part in enumerate(parts):
            path.append(part)
            tables = self.array_tables.get(tuple(path))
            if tables and depth < len(parts) - 1:
                path.append(tables - 1)
        return tuple(path)

    def pair(self, prefix: Path, node) -> None:
        """Index a key/value pair and everything nested in its value (without recursion, so
        absurdly nested input cannot exhaust the stack)."""
        pending: list[tuple[Path, Any]] = [(prefix, node)]
        while pending:
            prefix, pair = pending.pop()
            named = [child for child in pair.named_children if child.type != "comment"]
            key, value = named[0], named[-1]
            parts = _key_parts(key)
            for depth in range(1, len(parts) + 1):
                self.mark_key((*prefix, *parts[:depth]), key)
            values = [((*prefix, *parts), value)]
            while values:
                path, current = values.pop()
                self.index.values[path] = self.position(current)
                children = [c for c in current.named_children if c.type != "comment"]
                if current.type == "inline_table":
                    pending.extend((path, child) for child in children if child.type == "pair")
                elif current.type == "array":
                    values.extend(((*path, n), item) for n, item in enumerate(children))


def index_positions(source: bytes) -> PositionIndex:
    """Positions of every key and value in a TOML file that tomllib has accepted."""
    indexer = _Indexer(source)
    indexer.document(_parser().parse(source).root_node)
    return indexer.index
