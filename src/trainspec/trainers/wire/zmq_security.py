"""The ZeroMQ rollout transport's security (the transport is in transport_zmq.py): where it
listens, its keys and its limits.

The orchestrator listens at the address of `rollout_transport.host`, the one the trainers
connect to, never on every interface: localhost (and '', '*', '0.0.0.0', which the trainers
reach as localhost) is 127.0.0.1, another name or address what it resolves to on that node.

One secret per run, shared through the run directory both sides already share (the weight
broadcast needs it too):

    run_dir/rollouts/zmq.key     32 random bytes, mode 0600, owned by the user running the job

Whichever process comes first (the orchestrator or any trainer rank) creates it with
O_CREAT|O_EXCL|O_NOFOLLOW, so exactly one secret is ever written; the others wait for its 32
bytes and read it. A file that is not a regular file of the user's, is readable or writable by
group or others, or does not hold 32 bytes is refused: delete it and it is made afresh. `clean`
deletes run_dir/rollouts (wire/broadcast.py: stale_dirs), so a fresh run gets a fresh secret; a
resumed run keeps its own.

Two CURVE key pairs are derived from the secret (HMAC-SHA256 under a label each): the
orchestrator's (the server) and the trainer ranks' (the clients). Neither public key is written
anywhere; a peer that lacks the file can compute neither.

Why CURVE rather than an HMAC of the secret on each message:
- a peer without the key never gets a message into the process: its handshake fails. With a
  per-message MAC libzmq would still buffer whatever such a peer streams before we could check
  it (MAXMSGSIZE bounds a frame, not the frames of one multi-part message);
- every message is authenticated (Poly1305) *and* encrypted, both ways: a process squatting the
  port cannot pose as the orchestrator and feed the trainer, nobody on the path reads the
  batches, and a recorded message cannot be replayed on another connection;
- it is libzmq's own mechanism, with nothing of ours to get wrong on each message.
It costs encryption on libzmq's I/O thread (about 0.4 GB/s through both ends on a 2-core
machine: milliseconds for a typical step, hidden by the receiver's prefetch) and a libzmq built
with CURVE, as pyzmq's wheels are (`require_curve` refuses the run otherwise, naming the fix).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import secrets
import socket
import stat
import time
from pathlib import Path
from typing import NoReturn

import zmq
from zmq.utils import z85

from ..errors import SetupError

KEY_FILE = Path("rollouts") / "zmq.key"
SECRET_BYTES = 32
WAIT_FOR_KEY_S = 30.0  # another node's process created the file and is writing its 32 bytes
# the largest request or commit the orchestrator reads (they are ~100 bytes of JSON)
CONTROL_MAX_BYTES = 64 * 1024
# the largest batch (one rank's share of one step) the transport carries
MAX_BATCH_BYTES = 4 * 1024**3
# what CURVE adds to a frame on the wire, and then some (MAXMSGSIZE counts wire frames)
CURVE_OVERHEAD = 1024
WILDCARDS = ("", "*", "0.0.0.0")  # hosts the trainers reach as localhost


def require_curve() -> None:
    if not zmq.has("curve"):
        raise SetupError(
            "rollout_transport.type",
            f"this pyzmq's libzmq {zmq.zmq_version()} was built without CURVE security, which "
            "the ZeroMQ rollout transport needs to keep other users off its port",
            "install pyzmq from its wheels (they bundle libsodium), or set "
            'rollout_transport.type = "filesystem"',
        )


def run_secret(run_dir: Path) -> bytes:
    """The run's secret: created here unless another process of the run did first."""
    path = Path(run_dir) / KEY_FILE
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        return _read_secret(path)
    secret = secrets.token_bytes(SECRET_BYTES)
    try:
        os.write(fd, secret)
        os.fsync(fd)
    finally:
        os.close(fd)
    return secret


def _read_secret(path: Path) -> bytes:
    deadline = time.monotonic() + WAIT_FOR_KEY_S
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
            _refuse(path, "is a symbolic link")
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                _refuse(path, "is not a regular file")
            if info.st_uid != os.geteuid():
                _refuse(path, f"belongs to uid {info.st_uid}, not to this user")
            if info.st_mode & 0o077:
                _refuse(path, f"has mode {stat.S_IMODE(info.st_mode):o}: others may read it")
            secret = os.read(fd, SECRET_BYTES + 1)
        finally:
            os.close(fd)
        if len(secret) == SECRET_BYTES:
            return secret
        if len(secret) > SECRET_BYTES or time.monotonic() > deadline:
            _refuse(path, f"holds {len(secret)} bytes, not a {SECRET_BYTES}-byte key")
        time.sleep(0.05)  # its creator has not written it yet


def _refuse(path: Path, problem: str) -> NoReturn:
    raise SetupError(
        "rollout_transport",
        f"the run's ZeroMQ key {path} {problem}",
        f"delete {path} (the run makes a new one) and check who else writes to the run directory",
    )


def curve_keys(secret: bytes, role: str) -> tuple[bytes, bytes]:
    """(public, secret) CURVE key pair of `role` ("server" or "client"), Z85-encoded."""
    raw = hmac.new(secret, f"trainspec rollout transport {role}".encode(), hashlib.sha256)
    secret_key = z85.encode(raw.digest())
    return zmq.curve_public(secret_key), secret_key


def bind_address(host: str, port: int) -> str:
    """The address the trainers connect to (connect_address), never every interface."""
    if host in ("localhost", *WILDCARDS):
        return f"tcp://127.0.0.1:{port}"
    try:
        found = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise SetupError(
            "rollout_transport.host",
            f"{host!r} does not resolve to an IPv4 address on this node ({error})",
            "set rollout_transport.host to the orchestrator node's address or name",
        ) from error
    return f"tcp://{found[0][4][0]}:{port}"


def connect_address(host: str, port: int) -> str:
    return f"tcp://{'localhost' if host in WILDCARDS else host}:{port}"
