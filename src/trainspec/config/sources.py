"""Where config values come from: TOML files (with positions) and command-line overrides.

Every issue is located in the last source that set its path (files merge left to right, the
overrides come last), so a report can say `configs/rl.toml:12:7` or `--optim.lr`.

What is read and what is refused (FIFOs, devices, files over 16 MiB) is `reading.py`'s; how the
bytes become a document, and why a file that is not UTF-8 or not TOML is refused, is
`toml_parse.py`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

from .reading import MAX_BYTES, STDIN_NAMES, ConfigFileError, read_bytes
from .toml_parse import BOM, parse_toml

__all__ = ["MAX_BYTES", "STDIN_NAMES", "ConfigFileError", "FileSource", "FlagSource", "read_file"]

if TYPE_CHECKING:  # tree-sitter loads only when a report needs a position
    from .positions import Position, PositionIndex


def _child(data: Any, part: str) -> tuple[bool, Any]:
    if isinstance(data, dict):
        return (part in data, data.get(part))
    if isinstance(data, list) and part.isdigit() and int(part) < len(data):
        return (True, data[int(part)])
    return (False, None)


def _key(data: Any, parts: tuple[str, ...]) -> tuple[str | int, ...] | None:
    """`parts` as a key path into `data` (list indices as ints), or None if it is not there."""
    key: list[str | int] = []
    for part in parts:
        found, child = _child(data, part)
        if not found:
            return None
        key.append(int(part) if isinstance(data, list) else part)
        data = child
    return tuple(key)


@dataclass(slots=True)
class FileSource:
    """One parsed file; `text` is the whole of what was read (without a byte-order mark), so
    nothing needs to read the file, or stdin, a second time."""

    path: str
    data: dict[str, Any]
    text: bytes
    _index: PositionIndex | None = None

    def has(self, parts: tuple[str, ...]) -> bool:
        return _key(self.data, parts) is not None

    def position(self, parts: tuple[str, ...], of_key: bool = False) -> Position:
        from .positions import Position, index_positions

        if self._index is None:
            self._index = index_positions(self.text)
        key = _key(self.data, parts)
        if key is None:
            return Position(1, 1)
        found = self._index.keys.get(key) if of_key else None
        return found or self._index.find(key) or Position(1, 1)

    def origin(self, parts: tuple[str, ...]) -> str:
        return f"{self.path}:{self.position(parts).line}"


@dataclass(slots=True)
class FlagSource:
    """Command-line overrides: the document they add up to and the flag behind each path."""

    data: dict[str, Any] = field(default_factory=dict)
    flags: dict[tuple[str, ...], str] = field(default_factory=dict)

    def has(self, parts: tuple[str, ...]) -> bool:
        return _key(self.data, parts) is not None

    def flag(self, parts: tuple[str, ...]) -> str:
        for depth in range(len(parts), 0, -1):
            flag = self.flags.get(parts[:depth])
            if flag:
                return flag
        return next(iter(self.flags.values()), "")

    def origin(self, parts: tuple[str, ...]) -> str:
        return self.flag(parts)


Source = FileSource | FlagSource


def schema_directive(text: bytes) -> tuple[int, str] | None:
    """(line number, target) of the `#:schema` directive in the comments and blank lines that
    open a file (a byte-order mark before it is fine), or None. Editors read it only on line 1;
    returning its line lets a caller say so when it is further down."""
    for number, line in enumerate(text.removeprefix(BOM).split(b"\n"), start=1):
        stripped = line.decode("utf-8", "replace").strip()
        if stripped.startswith("#:schema"):
            return number, stripped.removeprefix("#:schema").strip()
        if stripped and not stripped.startswith("#"):
            return None  # the first key or table: the header comments are over
    return None


def read_file(path: str | PathLike[str]) -> FileSource:
    """Read and parse one TOML config file (`-` for stdin); raise ConfigFileError, with a
    position where there is one, if it cannot be read or is not TOML a trainer can take."""
    name = os.fspath(path)
    if not isinstance(name, str):
        raise TypeError(f"a config path must be a str or os.PathLike[str], got {name!r}")
    path, raw = read_bytes(name)
    data, text = parse_toml(path, raw)
    return FileSource(path, data, text)


def last_source(sources: list[Source], parts: tuple[str, ...]) -> Source | None:
    """The source that set `parts` last (the one whose value won the merge)."""
    for source in reversed(sources):
        if source.has(parts):
            return source
    return None
