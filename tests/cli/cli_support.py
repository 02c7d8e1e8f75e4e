"""Helpers for the validate-config tests: run the CLI in-process, check where every issue points,
and write TOML (tomli-w is not a dependency, so a minimal writer lives here)."""

from __future__ import annotations

import datetime
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainspec.cli.validate_config import run

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
CONFIGS = sorted((ROOT / "configs").rglob("*.toml"))
CRASH_MARKERS = ("Traceback", "internal error")


@dataclass(frozen=True, slots=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def report(self) -> dict[str, Any]:
        """The --format json report (fails the test if stdout is not one JSON object)."""
        try:
            report = json.loads(self.stdout)
        except ValueError as exc:
            raise AssertionError(f"stdout is not JSON ({exc}):\n{self.stdout}") from None
        assert isinstance(report, dict), report
        assert set(report) == {"valid", "kind", "errors", "warnings", "config"}, report.keys()
        return report


def run_cli(*argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return Result(code, out.getvalue(), err.getvalue())


def assert_no_crash(result: Result) -> None:
    for marker in CRASH_MARKERS:
        assert marker not in result.stdout, f"{marker!r} in stdout:\n{result.stdout}"
        assert marker not in result.stderr, f"{marker!r} in stderr:\n{result.stderr}"


def _lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8").replace("\r\n", "\n").split("\n")


def assert_located(issues: list[dict[str, Any]], files: list[str], cwd: Path | None = None) -> None:
    """Every issue has a file position inside one of `files` that points at something (a key,
    a value or a table header, never a blank or a comment), or the flag that set it."""
    base = cwd or Path.cwd()
    for issue in issues:
        where = (issue.get("file"), issue.get("line"), issue.get("column"))
        if issue.get("flag"):
            assert issue["flag"].startswith("--"), issue
            continue
        assert all(part is not None for part in where), f"issue without position or flag: {issue}"
        file, line, column = where
        assert file in files, f"issue in {file!r}, not one of the inputs {files}: {issue}"
        lines = _lines(base / file)
        assert 1 <= line <= len(lines), f"line {line} outside {file} ({len(lines)} lines): {issue}"
        text = lines[line - 1]
        assert 1 <= column <= len(text), f"column {column} outside line {line} {text!r}: {issue}"
        # A key, a value or a table header starts there: not a blank, not a comment.
        assert text[column - 1] not in " \t#", f"{file}:{line}:{column} is {text!r}: {issue}"


# ------------------------------------------------------------------ a minimal TOML writer

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    escaped = []
    for char in text:
        if char == '"':
            escaped.append('\\"')
        elif char == "\\":
            escaped.append("\\\\")
        elif char == "\n":
            escaped.append("\\n")
        elif char == "\t":
            escaped.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def toml_value(value: Any) -> str:
    """One TOML value; tables become inline tables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def dump_toml(document: dict[str, Any], header: str = "") -> str:
    """A document as TOML: scalars and arrays as `key = value`, sub-tables as [headers]."""
    out = [header] if header else []

    def table(path: tuple[str, ...], data: dict[str, Any]) -> None:
        scalars = [(k, v) for k, v in data.items() if not isinstance(v, dict)]
        tables = [(k, v) for k, v in data.items() if isinstance(v, dict)]
        if path and (scalars or not tables):
            out.append("[" + ".".join(_key(p) for p in path) + "]")
        for key, value in scalars:
            out.append(f"{_key(key)} = {toml_value(value)}")
        for key, value in tables:
            table((*path, key), value)

    table((), document)
    return "\n".join(out) + "\n"
