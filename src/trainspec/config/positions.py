"""Where each key and value of a TOML file sits (line and column), from tree-sitter's TOML parser.

tomllib gives the values and decides what is valid TOML; this index only answers "where is
`optim.lr` in this file", for error reports and `--explain`. It is built lazily, only when a
report needs a position.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field

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


def _key_parts(node) -> list[str]:
    if node.type == "dotted_key":
        return [part for child in node.named_children for part in _key_parts(child)]
    text = node.text.decode("utf-8", "replace")
    if node.type == "quoted_key":
        return [next(iter(tomllib.loads(f"{text} = 0")))]
    return [text]


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
                parts = tuple(_key_parts(header))
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

    def pair(self, prefix: Path, node) -> None:
        key, value = node.named_children[0], node.named_children[-1]
        parts = _key_parts(key)
        for depth in range(1, len(parts) + 1):
            self.mark_key((*prefix, *parts[:depth]), key)
        self.value((*prefix, *parts), value)

    def value(self, path: Path, node) -> None:
        self.index.values[path] = self.position(node)
        if node.type == "inline_table":
            for child in node.named_children:
                if child.type == "pair":
                    self.pair(path, child)
        elif node.type == "array":
            items = [c for c in node.named_children if c.type != "comment"]
            for number, item in enumerate(items):
                self.value((*path, number), item)


def index_positions(source: bytes) -> PositionIndex:
    """Positions of every key and value in a TOML file that tomllib has accepted."""
    indexer = _Indexer(source)
    indexer.document(_parser().parse(source).root_node)
    return indexer.index
