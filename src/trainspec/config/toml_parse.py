"""TOML bytes to a config document: tomllib, with every way a file can fail turned into a
located ConfigFileError that says how to fix it (TOML_FIXES: tomllib's reasons and their fixes),
and the limits TOML alone does not set (64-bit integers, nesting depth) checked.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from .limits import INT64_FIX, MAX_DEPTH, describe_integer, in_int64
from .reading import ConfigFileError

TOML_ERROR_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
BOM = b"\xef\xbb\xbf"


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


def parse_toml(path: str, raw: bytes) -> tuple[dict[str, Any], bytes]:
    """(document, bytes without a byte-order mark) of a config file named `path`; raise
    ConfigFileError if they are not UTF-8 TOML that a trainer can take."""
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
    return data, raw


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
