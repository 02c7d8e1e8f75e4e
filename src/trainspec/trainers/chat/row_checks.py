"""Local JSON files checked row by row before `datasets` reads them, so a bad row is named by
file and line; and `row_problem`, what keeps one row from being a chat.

    problem = row_problem(row)                   # None, or what is wrong with one row
    where = check_json_files(files, "data")      # where[i]: "rows.jsonl:4", the i-th row

A row holds `messages`, ShareGPT `conversations`, or `prompt` and `completion`, and maybe
`tools` (layouts.py says what each may hold). `check_json_files` reads each .jsonl file line by
line (and a .json file as one array, or as JSON lines when it is not one): bytes that are not
UTF-8, a line that is not JSON and a row that is no chat (a content part that is not text, tools
that are not a list or its JSON text, ...) are SetupErrors on `<prefix>.name` that give
`file:line`, the field and what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import SetupError
from .layouts import ROW_FIX, BadRow, conversation


def row_problem(row: Any) -> str | None:
    """What keeps `row` from being a chat example (layouts.py), or None."""
    try:
        conversation(row)
    except BadRow as bad:
        return bad.problem
    return None


def _refuse(prefix: str, where: str, problem: str, fix: str = ROW_FIX) -> SetupError:
    return SetupError(f"{prefix}.name", f"{where}: {problem}", fix)


def _lines(path: Path, prefix: str) -> list[tuple[int, str]]:
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _refuse(
            prefix,
            f"{path}:{line}:{column}",
            f"is not UTF-8 text (byte 0x{raw[exc.start]:02x}: {exc.reason})",
            "save the file as UTF-8 (iconv -f latin1 -t utf-8, or your editor's encoding menu)",
        ) from None
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _rows_of(path: Path, prefix: str) -> list[tuple[str, Any]]:
    """(location, row) of every row of one file, in the order `datasets` reads them."""
    lines = _lines(path, prefix)
    if path.suffix == ".json" and lines and lines[0][1].lstrip().startswith("["):
        try:
            rows = json.loads("\n".join(line for _, line in lines))
        except ValueError as exc:
            raise _refuse(prefix, str(path), f"is not a JSON array of rows ({exc})") from None
        if isinstance(rows, list):
            return [(f"{path}: row {index + 1}", row) for index, row in enumerate(rows)]
    found = []
    for number, line in lines:
        try:
            found.append((f"{path}:{number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise _refuse(
                prefix,
                f"{path}:{number}",
                f"is not a JSON object ({exc.msg} at column {exc.colno})",
                "write one JSON object per line",
            ) from None
    return found


def check_json_files(files: list[str], prefix: str) -> list[str]:
    """Every row of local .json/.jsonl `files` checked; where each row is, in load order."""
    where = []
    for name in files:
        for location, row in _rows_of(Path(name), prefix):
            try:
                conversation(row)
            except BadRow as bad:
                raise _refuse(prefix, location, bad.problem, bad.fix) from None
            where.append(location)
    return where
