"""The errors a trainer reports as an answer, not a traceback: a setting it cannot honour here
(SetupError, before training) and what stopped a run that was training (RunError: a full disk,
a step with nothing to train). Both say which setting or path, why, and what to do instead;
the entrypoint prints them and exits 1.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from trainspec.config.locate import written_at


class SetupError(Exception):
    """A setting this device or build cannot honour, or an input that cannot be read."""

    def __init__(self, path: str, problem: str, fix: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.fix = fix

    def render(self) -> str:
        """`path: error: problem` and its fix, after `file:line:col: ` (or the flag) where the
        setting was written, when the command remembered its sources (config/locate.py)."""
        where = written_at(self.path)
        head = f"{where}: " if where else ""
        return f"{head}{self.path}: error: {self.problem}\n    fix: {self.fix}"


class SetupErrors(Exception):
    """Several refusals found at once, reported together."""

    def __init__(self, errors: list[SetupError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors

    def render(self) -> str:
        return "\n".join(e.render() for e in self.errors)


def raise_all(errors: list[SetupError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise SetupErrors(errors)


class RunError(SetupError):
    """What stopped a run once it was training; the checkpoints already written are intact."""


# What an OS error on a run's files means, by errno.
IO_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted",
    errno.EIO: "an I/O error from the device",
}
# What torch and safetensors say instead of an errno when a write runs out of room.
FULL_DISK_WORDS = ("No space left", "StorageFull", "unexpected pos", "file write failed")


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc`, what caused it, and what failed on each rank of a torch.distributed.checkpoint
    failure (its `failures`: rank -> (exception, traceback))."""
    found: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop()
        if current is None or any(current is seen for seen in found):
            continue
        found.append(current)
        pending += [current.__cause__, current.__context__]  # type: ignore[list-item]
        failures = getattr(current, "failures", None)
        if isinstance(failures, dict):
            pending += [pair[0] for pair in failures.values() if isinstance(pair, tuple)]
    return found


def io_reason(exc: BaseException, directory: Path) -> str | None:
    """Why writing under `directory` failed, in words, when it is the storage's doing (full,
    read-only, no permission); None for any other failure."""
    causes = _causes(exc)
    for cause in causes:
        if isinstance(cause, OSError) and cause.errno in IO_REASONS:
            return IO_REASONS[cause.errno]
    if any(word in str(cause) for cause in causes for word in FULL_DISK_WORDS):
        return "no space left on the device"
    free = free_bytes(directory)
    if free is not None and free < 1 << 20:  # what failed, failed writing to a full disk
        return "no space left on the device"
    return None


def free_bytes(directory: Path) -> int | None:
    for path in (directory, *directory.parents):
        if path.exists():
            try:
                return shutil.disk_usage(path).free
            except OSError:
                return None
    return None


def size_text(count: float) -> str:
    """1536 -> "1.5 KiB"."""
    unit = "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            break
        count /= 1024
    return f"{count:,.0f} {unit}" if unit == "bytes" else f"{count:,.1f} {unit}"
