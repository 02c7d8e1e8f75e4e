"""Run files written whole or not at all, and append-only records read past a torn last line.

    write_atomic(run_dir / "rl-trainer.json", text, private=True)  # 0600: it may hold secrets
    records = read_records(run_dir / "orchestrator" / "picks.jsonl")

A crash (SIGKILL, power, a full disk) in the middle of a write leaves the file as it was: the
data goes to a temporary file beside it (`.<name>.<pid>.<thread>.tmp`, created anew: whatever
already has that name, a crashed writer's file or a planted symlink, is unlinked and never
written through), is flushed to the disk, and is renamed over the old one, which readers see
replaced in one step. A `private` file is created readable by its owner only, whatever
the umask (launch configs carry `env_vars` and headers).

An append-only record file (one JSON object a line) cut short by a crash ends in a partial
line: `read_records` skips that last line with a warning (its record was never committed) and
refuses a broken line anywhere else, naming the file and line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from pathlib import Path

from ..errors import SetupError

log = logging.getLogger("trainspec.run")
TRIES = 5


def write_atomic(path: Path, data: str | bytes, *, private: bool = False) -> None:
    """Replace `path` with `data` in one step (see the module's docstring)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for attempt in range(TRIES):
        try:
            descriptor = os.open(temp, flags, 0o600 if private else 0o666)
            break
        except FileExistsError:  # stale (a crashed writer's) or planted: never written through
            if attempt == TRIES - 1:
                raise
            temp.unlink(missing_ok=True)  # a link itself, not its target
    try:
        with os.fdopen(descriptor, "wb" if isinstance(data, bytes) else "w") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    with contextlib.suppress(OSError):  # the rename itself on the disk (not every fs allows it)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def read_records(path: Path) -> list[dict]:
    """The JSON objects of an append-only file, a line each; [] when there is no file."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            if number == len(lines):
                log.warning("%s:%d: skipped a last line cut short by a crash", path, number)
                break
            raise SetupError(
                f"{path}:{number}",
                f"is not a whole JSON record ({exc}), and records follow it",
                "restore the file from a backup, or start the run afresh",
            ) from None
        records.append(record)
    return records
