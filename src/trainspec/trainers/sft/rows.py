"""What a chat row must hold, and local JSON files checked row by row before `datasets` reads
them, so a bad row is named by file and line.

    problem = row_problem(row)                   # None, or what is wrong with one row
    where = check_json_files(files, "data")      # where[i]: "rows.jsonl:4", the i-th row

A row holds `messages` (a list of {role, content} objects, content text or a list of parts) or
`prompt` and `completion` (each text or such a list). `check_json_files` reads each .jsonl file
line by line (and a .json file as one array, or as JSON lines when it is not one): bytes that
are not UTF-8, a line that is not JSON and a row `row_problem` rejects are SetupErrors on
`<prefix>.name` that give `file:line`, the field and what to do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import SetupError

ROW_FIX = (
    "give every row a messages list of {role, content} objects, or prompt and completion "
    "(each text or such a list)"
)


def _kind_of(value: Any) -> str:
    names = {str: "text", list: "a list", dict: "an object", bool: "a boolean", type(None): "null"}
    return names.get(type(value), f"the number {value!r}")


def _message_problem(message: Any, where: str) -> str | None:
    if not isinstance(message, dict):
        return f"{where} is {_kind_of(message)}, not a {{role, content}} object"
    role = message.get("role")
    if not isinstance(role, str) or not role:
        return f"{where}.role is {_kind_of(role)}, not a role name such as user or assistant"
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        return f"{where}.content is {_kind_of(content)}, not text"
    return None


def _messages_problem(value: Any, field: str) -> str | None:
    if isinstance(value, str) and field != "messages":
        return None  # prompt or completion as text
    if not isinstance(value, list):
        return f"{field} is {_kind_of(value)}, not a list of {{role, content}} messages"
    for index, message in enumerate(value):
        problem = _message_problem(message, f"{field}[{index}]")
        if problem:
            return problem
    return None


def row_problem(row: Any) -> str | None:
    """What keeps `row` from being a chat example, or None."""
    if not isinstance(row, dict):
        return f"the row is {_kind_of(row)}, not an object with messages or prompt/completion"
    if row.get("messages") is not None:
        return _messages_problem(row["messages"], "messages")
    if row.get("prompt") is not None and row.get("completion") is not None:
        return _messages_problem(row["prompt"], "prompt") or _messages_problem(
            row["completion"], "completion"
        )
    return "the row has neither messages nor both prompt and completion"


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
            problem = row_problem(row)
            if problem:
                raise _refuse(prefix, location, problem)
            where.append(location)
    return where
