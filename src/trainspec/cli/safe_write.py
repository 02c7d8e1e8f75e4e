"""Replace a file's contents in place the way a careful editor saves, for migrate-config.

    before = version("run.toml")             # device, inode, size, mtime: before reading it
    ...                                      # read it, work out the new bytes
    current = unchanged("run.toml", before)  # FileChanged if written since; else mode, owner...
    replace(current, new_bytes)              # FileChanged if written since `current`

The new bytes go to `.NAME.migrate-PID.tmp` in the file's own directory (so the rename cannot
cross file systems), get the file's mode, owner and group, and are synced to disk; the file is
then read once more, and only if it is still `current` (device, inode, size, mtime and bytes)
is the temporary renamed over it, and the directory synced, so that a crash leaves either the
old file or the new one, never a mix or an empty file. Whatever fails on the way, the temporary
is removed. A process killed outright (SIGKILL, power loss) cannot remove it: `remove_stale`
removes those of processes that are gone, and migrate-config calls it before each file.

Limits, by design: without a lock, a write landing between the last re-read and the rename
(microseconds) is not seen; a hard link to the file keeps the old contents, as with any editor
that saves by renaming; ACLs and extended attributes are not copied; a file's temporary made
by a live process in another PID namespace (a container sharing the directory) whose pid is
free here is taken for a stale one (that run then fails with nothing written).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from dataclasses import dataclass

TEMP_TAG = "migrate"
# Bytes of the file's name kept in its temporary's name: a 255-byte name (the usual NAME_MAX)
# plus ".", ".migrate-", a pid and ".tmp" would not fit.
NAME_ROOM = 200
# A file system that cannot sync a directory says so with one of these; nothing more can be done.
NO_DIRECTORY_SYNC = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF}


class FileChanged(Exception):
    """The file is no longer what was read: something else wrote, replaced or removed it."""


class CannotKeepOwner(OSError):
    """The temporary cannot be given the file's owner and group (only root may give a file to
    another user), so renaming it over the file would change who owns the file."""

    def __init__(self, uid: int, gid: int, reason: str) -> None:
        super().__init__(errno.EPERM, reason)
        self.uid, self.gid = uid, gid


class NotRegularFile(OSError):
    """A FIFO, a device or a socket: there is no file to put new contents in place of."""


class NotSynced(OSError):
    """The file was replaced, but its directory could not be synced: the rename is done, yet it
    may not survive a crash of the machine."""


@dataclass(frozen=True, slots=True)
class Version:
    """Which file, and when it was last written: what a write by another program changes (an
    editor that saves by renaming changes the inode; one that writes in place, size or mtime)."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> Version:
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A regular file as read: where it is (symlinks resolved), its version, who owns it, its
    permissions, and its bytes (they tell a write that kept size and a coarse mtime)."""

    path: str
    version: Version
    mode: int
    uid: int
    gid: int
    data: bytes


def version(path: str) -> Version | None:
    """The file's version now; None if it cannot be stat'ed (reading it will say why). Taken
    before the file is read, so that any write after it shows in a later snapshot."""
    try:
        return Version.of(os.stat(os.path.realpath(path)))
    except (OSError, ValueError):
        return None


def snapshot(path: str) -> Snapshot:
    """Stat and read the file through one descriptor, so that both describe the same file. Only
    a regular file can be replaced by renaming (opening a FIFO must not wait for a writer)."""
    target = os.path.realpath(path)
    fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, "it is not a regular file, so it cannot be replaced")
        data = handle.read()
    return Snapshot(target, Version.of(info), info.st_mode, info.st_uid, info.st_gid, data)


def replace(current: Snapshot, data: bytes) -> None:
    """Put `data` in place of the file `current` was taken of, keeping its mode, owner and group.
    Raises FileChanged (nothing written) if the file changed since `current`, CannotKeepOwner
    (nothing written) if its owner cannot be kept, NotSynced if the rename is done but the
    directory could not be synced, OSError for anything else (nothing written)."""
    temporary = temp_path(current.path, os.getpid())
    fd = _create(temporary)
    try:
        try:
            _write_all(fd, data)
            _keep_owner_and_mode(fd, current)
            os.fsync(fd)  # the bytes are on disk before the name points at them
        finally:
            os.close(fd)
        now = _reread(current.path)
        if (now.version, now.data) != (current.version, current.data):
            raise FileChanged(current.path)
        os.replace(temporary, current.path)
    except BaseException:  # KeyboardInterrupt and SystemExit (SIGTERM) too: leave nothing behind
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_directory(os.path.dirname(current.path))


def temp_path(target: str, pid: int) -> str:
    """Where process `pid` writes the new contents of `target` (a resolved path)."""
    directory, name = os.path.split(target)
    return os.path.join(directory, f"{_temp_prefix(name)}{pid}.tmp")


def remove_stale(path: str) -> list[str]:
    """Remove the temporaries of `path` whose process is gone (killed before its rename) and
    return their names. Best effort: a directory that cannot be listed, or a temporary that
    cannot be removed, is left for a later run rather than failing this one."""
    directory, name = os.path.split(os.path.realpath(path))
    pattern = re.compile(re.escape(_temp_prefix(name)) + r"([0-9]{1,10})\.tmp")
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for entry in sorted(entries):
        found = pattern.fullmatch(entry)
        if found is None or _alive(int(found.group(1))):
            continue
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, entry))
            removed.append(entry)
    return removed


def _temp_prefix(name: str) -> str:
    return f".{os.fsdecode(os.fsencode(name)[:NAME_ROOM])}.{TEMP_TAG}-"


def _alive(pid: int) -> bool:
    """Whether process `pid` exists. This process's own pid on an old temporary means another
    process had it before: this one has not made its temporary yet."""
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _create(path: str) -> int:
    """Create the temporary, readable by its owner only until it gets the file's mode. One that
    already exists carries this process's pid, so it was left by an earlier process: replace it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o600)
    except FileExistsError:
        os.unlink(path)
        return os.open(path, flags, 0o600)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _keep_owner_and_mode(fd: int, current: Snapshot) -> None:
    """Give the temporary the file's owner, group and mode; the mode last, because changing the
    owner clears the set-user-ID and set-group-ID bits."""
    made = os.fstat(fd)
    if (made.st_uid, made.st_gid) != (current.uid, current.gid):
        try:
            os.fchown(fd, current.uid, current.gid)
        except OSError as err:
            reason = (err.strerror or str(err)).lower()
            raise CannotKeepOwner(current.uid, current.gid, reason) from None
    os.fchmod(fd, stat.S_IMODE(current.mode))


def unchanged(path: str, before: Version | None) -> Snapshot:
    """The file as it is now, provided it is still version `before`; FileChanged if it is not,
    or is gone. The caller compares the bytes with those it read."""
    current = _reread(path)
    if current.version != before:
        raise FileChanged(path)
    return current


def _reread(path: str) -> Snapshot:
    try:
        return snapshot(path)
    except FileNotFoundError:  # removed, or renamed away, meanwhile
        raise FileChanged(path) from None


def _sync_directory(directory: str) -> None:
    """Sync the directory, so that the rename itself survives a crash."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as err:
        if err.errno not in NO_DIRECTORY_SYNC:
            raise NotSynced(err.errno, (err.strerror or str(err)).lower()) from None
