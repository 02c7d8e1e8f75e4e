"""The built validator of each config kind, and of each lazily loaded table (sft's [eval],
trainspec.config_model), kept between processes.

Pydantic builds a class's validator the first time it is used: for a trainer config that is
most of what a `validate-config` process spends beyond importing pydantic. The validator and
serializer pydantic-core builds are picklable (their core schema, with references to the
classes and functions it calls), so the first process that builds them stores them, and later
ones load them in about a millisecond.

The file is keyed by everything that could change what was built: the Python, pydantic and
pydantic-core versions and the bytes of the generated classes and of `config_model.py`. Anything
else (a missing, stale, unreadable or corrupt file) falls back to pydantic's own build, so a
cache can make a check faster, never different. Files are written whole (a temporary, then a
rename), readable by their owner only.

Unpickling runs code the file names, so a file is loaded only if no one but this user could
have written it: the file and its directory owned by this user and writable by no one else
(no group or other write bit), the file a regular file, no link followed. Anything else is
ignored, never unpickled: the validator is built as if there were no cache, and a file is
stored only in a directory that passes the same check: the default directory, trainspec's own,
is made 0700 (an older trainspec made it under the umask, 0775 with umask 002); a
TRAINSPEC_CACHE_DIR is left as it is, so a shared one (group-writable, or another user's)
caches nothing.

    TRAINSPEC_CACHE_DIR   where the files go (default: $XDG_CACHE_HOME/trainspec, ~/.cache/...)
    TRAINSPEC_NO_CACHE=1  build every time, read and write nothing
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from pathlib import Path
from typing import Any

try:  # CPython's C modules: the `pickle` and `hashlib` modules around them load more first
    import _pickle as pickle
    from _blake2 import blake2b
except ImportError:  # another Python
    import pickle  # type: ignore[no-redef]
    from hashlib import blake2b

FORMAT = 1


def cache_dir() -> Path:
    if os.environ.get("TRAINSPEC_CACHE_DIR"):
        return Path(os.environ["TRAINSPEC_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "trainspec"


@functools.cache
def _built_from() -> bytes:
    """The digest of what every validator is built from (read once a process, however many
    classes it installs)."""
    import pydantic
    import pydantic_core

    import trainspec.generated

    digest = blake2b(digest_size=16)
    for part in (FORMAT, sys.version, pydantic.VERSION, pydantic_core.__version__):
        digest.update(f"{part}\0".encode())
    sources = sorted(Path(trainspec.generated.__file__).parent.glob("*.py"))
    for path in [Path(__file__).with_name("config_model.py"), *sources]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.digest()


def _key(kind: str) -> str:
    return blake2b(f"{kind}\0".encode() + _built_from(), digest_size=16).hexdigest()


def _path(kind: str) -> Path:
    return cache_dir() / f"validator-{kind}-{_key(kind)}.pickle"


def _private(status: os.stat_result) -> bool:
    """Owned by this user, and writable by no one else."""
    return status.st_uid == os.geteuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _read(path: Path) -> bytes:
    """The bytes of `path`, when only this user could have written them (see the module's
    docstring); an OSError otherwise. Checked on the open descriptors, so nothing swapped in
    between the check and the read is taken."""
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if not _private(os.fstat(directory)):
            raise PermissionError(f"{path.parent} is not this user's alone")
        fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=directory)
        with open(fd, "rb") as handle:
            status = os.fstat(fd)
            if not (stat.S_ISREG(status.st_mode) and _private(status)):
                raise PermissionError(f"{path} is not this user's alone")
            return handle.read()
    finally:
        os.close(directory)


def install(cls: Any, kind: str) -> None:
    """Give `cls` its stored validator and serializer, or build them and store them."""
    if os.environ.get("TRAINSPEC_NO_CACHE"):
        return
    try:
        path = _path(kind)
        validator, serializer = pickle.loads(_read(path))
    except Exception:  # noqa: BLE001 - no usable file: build as pydantic always does
        _store(cls, kind)
        return
    cls.__pydantic_validator__ = validator
    cls.__pydantic_serializer__ = serializer


def _store(cls: Any, kind: str) -> None:
    import tempfile

    try:
        cls.model_rebuild()  # what the first validation would do
        blob = pickle.dumps((cls.__pydantic_validator__, cls.__pydantic_serializer__))
        path = _path(kind)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        status = os.stat(path.parent)
        if not os.environ.get("TRAINSPEC_CACHE_DIR") and status.st_uid == os.geteuid():
            os.chmod(path.parent, stat.S_IMODE(status.st_mode) & 0o700)  # trainspec's own
        elif not _private(status):
            return  # it would never be read (see _read)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".", delete=False) as tmp:
            tmp.write(blob)
        os.replace(tmp.name, path)  # NamedTemporaryFile is created 0600
    except Exception:  # noqa: BLE001 - a cache that cannot be written is only slower
        return
