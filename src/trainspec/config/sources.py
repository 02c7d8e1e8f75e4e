"""Where config values come from: TOML files (with positions) and command-line overrides.

Every issue is located in the last source that set its path (files merge left to right, the
overrides come last), so a report can say `configs/rl.toml:12:7` or `--optim.lr`.

What `read_file` reads, decided once for every entrypoint:

- a regular file (or a symlink to one), up to MAX_BYTES (16 MiB; a config is a few KiB). The
  size is checked with `stat` before anything is read, and the read itself stops one byte past
  the cap, so a 2 GB file, or a /proc file that grows, can never exhaust memory;
- `-` means stdin, and so do /dev/stdin, /dev/fd/0 and /proc/self/fd/0: stdin is read once,
  whole (a second `-` gets the same text), through the same cap; a terminal is refused, as the
  read would wait for typing;
- anything else is refused, with a one-line error naming the path and the fix: a FIFO (what
  `<(...)` gives), a character or block device (/dev/zero), a socket, a directory. The type is
  checked with `stat` before the file is opened, so a FIFO with no writer can never hang.

A file that cannot be reached, opened or read is a ConfigFileError (exit 2 in the CLIs), never
an OSError; so is a file that is not UTF-8, not TOML, holds an integer outside 64 bits, or nests
so deeply that the TOML parser gives up (located at the first bracket past MAX_DEPTH).
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tomllib
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

from .limits import INT64_FIX, MAX_DEPTH, describe_integer, in_int64

if TYPE_CHECKING:  # tree-sitter loads only when a report needs a position
    from .positions import Position, PositionIndex

TOML_ERROR_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
MAX_BYTES = 16 * 2**20
STDIN_NAMES = {"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"}
BOM = b"\xef\xbb\xbf"
OPEN_FLAGS = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)  # POSIX only


class ConfigFileError(Exception):
    """A config file that cannot be read, or is not TOML; carries the parser's position.

    `message` says what is wrong and, after a semicolon, how to fix it when that is not plain
    from the message ("no such file or directory" is its own fix)."""

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
    if name not in STDIN_NAMES:
        return parse_bytes(name, _read_regular(name))
    shown = "<stdin>" if name == "-" else name  # how reports name it
    return parse_bytes(shown, _read_stdin(shown))


def _too_big(path: str, size: int | None) -> ConfigFileError:
    mib = MAX_BYTES // 2**20
    what = f"is {size / 2**20:.1f} MiB" if size is not None else f"is more than {mib} MiB"
    return ConfigFileError(
        path,
        f"{what}; a config larger than {mib} MiB is refused (a trainer config is a few KiB): "
        "check that this is the config file you meant",
    )


_SPECIAL = {
    stat.S_ISDIR: ("a directory, not a TOML file", "pass the config file inside it"),
    stat.S_ISFIFO: ("a FIFO, not a regular file", "pipe it into stdin and pass - instead"),
    stat.S_ISCHR: ("a character device, not a regular file", "pass a config file"),
    stat.S_ISBLK: ("a block device, not a regular file", "pass a config file"),
    stat.S_ISSOCK: ("a socket, not a regular file", "pass a config file"),
}


def _refuse_special(path: str, mode: int) -> None:
    """Refuse anything but a regular file, before it is opened (opening a FIFO blocks)."""
    if stat.S_ISREG(mode):
        return
    what, fix = next(
        (words for test, words in _SPECIAL.items() if test(mode)),
        ("not a regular file", "pass a config file"),
    )
    raise ConfigFileError(path, f"is {what}; {fix}")


def _os_error(path: str, exc: OSError, reaching: bool) -> ConfigFileError:
    """An OSError as a one-line ConfigFileError; `reaching`: it came from stat, not open."""
    reason = (exc.strerror or str(exc)).lower()
    if isinstance(exc, PermissionError):
        if reaching:
            fix = "a directory on its path cannot be searched; fix its permissions (chmod +x)"
        else:
            fix = "make it readable (chmod +r) or run as a user who can read it"
        return ConfigFileError(path, f"{reason}; {fix}")
    return ConfigFileError(path, reason)


def _read_regular(path: str) -> bytes:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _os_error(path, exc, reaching=True) from None
    except ValueError:  # a NUL in the name
        raise ConfigFileError(path.replace("\0", "\\0"), "is not a valid file name") from None
    _refuse_special(path, info.st_mode)
    if info.st_size > MAX_BYTES:
        raise _too_big(path, info.st_size)
    try:
        # O_NONBLOCK: should the file have become a FIFO since the stat, opening returns
        # at once and the fstat below refuses it, instead of waiting for a writer.
        fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
    except OSError as exc:
        raise _os_error(path, exc, reaching=False) from None
    with open(fd, "rb", closefd=True) as handle:
        try:
            _refuse_special(path, os.fstat(fd).st_mode)
            raw = handle.read(MAX_BYTES + 1)
        except OSError as exc:
            raise _os_error(path, exc, reaching=False) from None
    if len(raw) > MAX_BYTES:  # it grew since the stat, or (/proc) reports no size
        raise _too_big(path, None)
    return raw


_stdin_read: tuple[Any, bytes] | None = None  # (the stream, what it held): stdin is read once


def _read_stdin(path: str) -> bytes:
    global _stdin_read
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise ConfigFileError(path, "cannot be read: stdin is closed; pipe a config into it")
    if _stdin_read is not None and _stdin_read[0] is stream:
        return _stdin_read[1]
    try:
        if stream.isatty():
            raise ConfigFileError(
                path, "is a terminal; pipe a config into it (cat run.toml | ... -) or pass a file"
            )
        raw = stream.read(MAX_BYTES + 1)
    except (OSError, ValueError) as exc:  # ValueError: a closed stream
        raise ConfigFileError(path, f"cannot be read: {str(exc).lower()}") from None
    if len(raw) > MAX_BYTES:
        raise _too_big(path, None)
    _stdin_read = (stream, raw)
    return raw


# tomllib's reasons (their start) and what to do about each.
TOML_FIXES = (
    (
        "Illegal character '\\n'",
        'close the string on this line (use """ for text over several lines)',
    ),
    ("Unterminated string", 'close the string with its quote (""" for several lines)'),
    ("Expected ']' at the end of a table", "close the table header with ]"),
    ("Expected ']]' at the end of an array", "close the header of the array of tables with ]]"),
    (
        "Invalid value",
        "write a value after =: text in quotes, a number, true or false, [an, array] or "
        "{ an = inline_table }",
    ),
    ("Cannot overwrite a value", "this key is set twice in one table: keep one of the two"),
    ("Cannot declare", "this table is declared twice: merge the two sections into one"),
    (
        "Cannot mutate immutable namespace",
        "an inline table cannot be extended later: write all its keys inside its { }",
    ),
    ("Expected '=' after a key", "write key = value (quote a key that holds spaces)"),
    ("Invalid statement", "each line holds key = value, a [table] header or a # comment"),
    ("Unclosed array", "close the array with ]"),
    ("Unclosed inline table", "close the inline table with } on the same line"),
    ("Invalid initial character for a key part", "quote the key, or start it with a letter"),
    (
        "Expected newline or end of document after a statement",
        "put each key = value on its own line; a comment starts with #",
    ),
    ("Invalid date or datetime", "quote it if you meant text (no setting takes a date)"),
)


def parse_bytes(path: str, raw: bytes) -> FileSource:
    """Parse the bytes of a config file named `path`; raise ConfigFileError if they are not
    UTF-8 TOML that a trainer can take."""
    raw = raw.removeprefix(BOM)  # a UTF-8 byte-order mark: invisible, not TOML
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
        fix = next((fix for start, fix in TOML_FIXES if reason.startswith(start)), None)
        message = f"is not valid TOML: {reason}" + (f"; {fix}" if fix else "")
        raise ConfigFileError(path, message, line, column) from None
    except RecursionError:
        line, column = _too_deep_at(text)
        raise ConfigFileError(
            path,
            f"nests arrays or inline tables too deeply to parse (more than {MAX_DEPTH} levels "
            "from this bracket on); no trainspec setting is nested that deeply: close the "
            "brackets sooner",
            line,
            column,
        ) from None
    except ValueError as exc:  # an integer literal of thousands of digits
        line, column = _long_integer_at(text)
        if "digits" not in str(exc):
            raise ConfigFileError(path, f"cannot be read: {exc}", line, column) from None
        raise ConfigFileError(
            path, f"has an integer outside TOML's 64-bit range; {INT64_FIX}", line, column
        ) from None
    _check_integer_range(path, text, data)
    return FileSource(path, data, raw)


def _end_of(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _position_of(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


# Strings and comments (whose brackets do not nest anything), and the brackets that do.
BRACKET_TOKENS = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}]',
    re.DOTALL,
)


def _too_deep_at(text: str) -> tuple[int, int]:
    """Where the first array or inline table past MAX_DEPTH levels opens (table headers open
    and close on their line, so they never get that deep)."""
    depth = 0
    for match in BRACKET_TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > MAX_DEPTH:
                return _position_of(text, match.start())
        elif token in ("]", "}"):
            depth = max(depth - 1, 0)
    return 1, 1


# Integer literals long enough to leave the 64-bit range: 2**63 has 19 decimal digits,
# 16 hexadecimal, 22 octal and 64 binary ones (underscores only make the test looser).
LONG_INTEGER = re.compile(
    r"[-+]?(?:0x[0-9A-Fa-f_]{16,}|0o[0-7_]{21,}|0b[01_]{63,}|[0-9][0-9_]{18,})"
)
BASES = {"0x": 16, "0o": 8, "0b": 2}


def _long_integer_at(text: str) -> tuple[int, int]:
    found = LONG_INTEGER.search(text)
    return _position_of(text, found.start()) if found else (1, 1)


def _check_integer_range(path: str, text: str, data: dict[str, Any]) -> None:
    """TOML integers are 64-bit; tomllib reads bigger ones, the trainers could not."""
    if not LONG_INTEGER.search(text):
        return  # the common case: no literal long enough to leave the range
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, int) and not isinstance(value, bool) and not in_int64(value):
            line, column = _literal_at(text, value)
            raise ConfigFileError(
                path,
                f"has an integer outside TOML's 64-bit range: {describe_integer(value)}; "
                f"{INT64_FIX}",
                line,
                column,
            )


def _integer_of(literal: str) -> int | None:
    digits = literal.replace("_", "")
    sign = -1 if digits.startswith("-") else 1
    digits = digits.lstrip("+-")
    base = BASES.get(digits[:2], 10)
    if base != 10:
        digits = digits[2:]
    elif len(digits) > 4000:  # past Python's limit on decimal conversion; never a match
        return None
    try:
        return sign * int(digits, base)
    except ValueError:
        return None


def _literal_at(text: str, value: int) -> tuple[int, int]:
    for match in LONG_INTEGER.finditer(text):
        if _integer_of(match.group()) == value:
            return _position_of(text, match.start())
    return 1, 1


def last_source(sources: list[Source], parts: tuple[str, ...]) -> Source | None:
    """The source that set `parts` last (the one whose value won the merge)."""
    for source in reversed(sources):
        if source.has(parts):
            return source
    return None
