"""The bytes of a config file: from a path or from stdin, and what is refused on the way.

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

Every failure is a ConfigFileError (exit 2 in the CLIs), never an OSError.
"""

from __future__ import annotations

import os
import stat
import sys
from os import PathLike
from typing import Any

MAX_BYTES = 16 * 2**20
STDIN_NAMES = {"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"}
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


def read_bytes(name: str) -> tuple[str, bytes]:
    """(the name reports use, the bytes) of the config at `name` (`-`: stdin)."""
    if name not in STDIN_NAMES:
        return name, _read_regular(name)
    shown = "<stdin>" if name == "-" else name
    return shown, _read_stdin(shown)


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
