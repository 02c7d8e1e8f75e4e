"""Where config values come from: TOML files (with positions) and command-line overrides.

Every issue is located in the last source that set its path (files merge left to right, the
overrides come last), so a report can say `configs/rl.toml:12:7` or `--optim.lr`.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # tree-sitter loads only when a report needs a position
    from .positions import Position, PositionIndex

TOML_ERROR_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


class ConfigFileError(Exception):
    """A config file that cannot be read, or is not TOML; carries the parser's position."""

    def __init__(
        self, path: str | PathLike[str], message: str, line: int | None = None, column: int = 1
    ) -> None:
        where = f"{path}:{line}:{column}" if line else str(path)
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.message = message
        self.line = line
        self.column = column if line else None


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


def read_file(path: str | PathLike[str]) -> FileSource:
    """Read and parse one TOML config file; raise ConfigFileError with a position if it fails."""
    where = Path(path)
    if where.is_dir():
        raise ConfigFileError(path, "is a directory, not a TOML file")
    try:
        raw = where.read_bytes()
    except OSError as exc:
        raise ConfigFileError(path, (exc.strerror or str(exc)).lower()) from None
    raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark: invisible, not TOML
    # An empty file is a valid TOML document with no settings: every default (as a file of
    # comments only already was); the reference reads it the same way.
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        line = raw[: exc.start].count(b"\n") + 1
        column = len(raw[line_start : exc.start].decode("utf-8", "replace")) + 1
        raise ConfigFileError(path, f"is not UTF-8 text ({exc.reason})", line, column) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = TOML_ERROR_AT.search(message)
        reason = TOML_ERROR_AT.sub("", message).replace("(at end of document)", "").strip()
        if found:
            line, column = int(found.group(1)), int(found.group(2))
        else:
            line, column = _end_of(text)
        raise ConfigFileError(path, f"is not valid TOML: {reason}", line, column) from None
    except RecursionError:
        raise ConfigFileError(path, "nests arrays or tables too deeply to parse") from None
    except ValueError as exc:  # e.g. an integer literal of thousands of digits
        line, column = _long_number_at(text)
        raise ConfigFileError(path, f"cannot be read: {exc}", line, column) from None
    _check_integer_range(path, text, data)
    return FileSource(str(path), data, raw)


def _end_of(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _position_of(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


LONG_NUMBER = re.compile(r"[-+]?[0-9][0-9_]{18,}")
INT64 = (-(2**63), 2**63 - 1)


def _long_number_at(text: str) -> tuple[int, int]:
    found = LONG_NUMBER.search(text)
    return _position_of(text, found.start()) if found else (1, 1)


def _check_integer_range(path, text: str, data: dict[str, Any]) -> None:
    """TOML integers are 64-bit; tomllib reads bigger ones, the trainers could not."""
    if not LONG_NUMBER.search(text):
        return  # the common case: no literal long enough to leave the range
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
            line, column = _literal_at(text, value)
            raise ConfigFileError(
                path, f"has an integer outside TOML's 64-bit range: {value}", line, column
            )


def _literal_at(text: str, value: int) -> tuple[int, int]:
    for match in LONG_NUMBER.finditer(text):
        digits = match.group().replace("_", "")
        if len(digits) < 4000 and int(digits) == value:
            return _position_of(text, match.start())
    return 1, 1


def last_source(sources: list[Source], parts: tuple[str, ...]) -> Source | None:
    """The source that set `parts` last (the one whose value won the merge)."""
    for source in reversed(sources):
        if source.has(parts):
            return source
    return None
