"""The rollout transports on a shared cluster (issue 36): the ZeroMQ transport listens only at
its configured host, lets in only peers holding the run's key (both ways), drops oversized
messages and keeps serving, and refuses a commit past the last step sent; the run's key file is
private; the filesystem transport never writes through a planted symbolic link.
Real sockets on loopback addresses and real files in tmp_path."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
import zmq
from helpers.ports import free_port
from test_transport import WAIT_S, assert_same, make_batch, receive, stop_after, wait_for

from trainspec.generated.rollout_transport import FileSystemTransportConfig, ZMQTransportConfig
from trainspec.trainers.errors import SetupError
from trainspec.trainers.wire import transport_fs, transport_zmq
from trainspec.trainers.wire.batch import decode
from trainspec.trainers.wire.transport import build_receiver, build_sender
from trainspec.trainers.wire.zmq_security import (
    CONTROL_MAX_BYTES,
    KEY_FILE,
    curve_keys,
    run_secret,
)

ABSENT_S = 1.5  # how long a peer that must get nothing is watched, after the others were served


@pytest.fixture
def ctx():
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


def peer(ctx, port: int, keys: tuple[bytes, bytes, bytes] | None, host: str = "127.0.0.1"):
    """A DEALER like a trainer's; `keys` (server public, client public, client secret) or none
    at all (no CURVE)."""
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.sndtimeo = int(WAIT_S * 1000)  # a refused handshake leaves no peer to queue for
    if keys is not None:
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = keys
    sock.connect(f"tcp://{host}:{port}")
    return sock


def run_keys(run_dir: Path) -> tuple[bytes, bytes, bytes]:
    secret = run_secret(run_dir)
    return (curve_keys(secret, "server")[0], *curve_keys(secret, "client"))


def ask(sock, **message) -> None:
    sock.send(json.dumps(message).encode())


def try_ask(sock, **message) -> None:
    """Send unless the peer's handshake already failed (then there is nobody to send to)."""
    with contextlib.suppress(zmq.Again):
        sock.send(json.dumps(message).encode(), zmq.NOBLOCK)


def replies(sock, seconds: float) -> list[tuple[dict, bytes]]:
    """Every reply `sock` gets within `seconds`: (header, payload)."""
    got, deadline = [], time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if sock.poll(int(left * 1000) + 1):
            head, *rest = sock.recv_multipart()
            got.append((json.loads(head), b"".join(rest)))
    return got


def reply(sock) -> tuple[dict, bytes]:
    """The next reply `sock` gets (a generous wait: it must come)."""
    assert sock.poll(int(WAIT_S * 1000)), "no reply"
    head, *rest = sock.recv_multipart()
    return json.loads(head), b"".join(rest)


def test_zmq_peers_without_the_runs_key_get_nothing_and_release_nothing(ctx, tmp_path):
    cfg = ZMQTransportConfig(port=free_port())
    with build_sender(cfg, tmp_path, 1) as sender:
        sender.send(0, 0, make_batch(0, 0))
        server_public = run_keys(tmp_path)[0]
        stranger = (server_public, *zmq.curve_keypair())  # knows the server key, not the client's
        rogues = [peer(ctx, cfg.port, None), peer(ctx, cfg.port, stranger)]
        for rogue in rogues:
            try_ask(rogue, op="get", id=1, step=0, rank=0, committed=10**9)
            try_ask(rogue, op="commit", rank=0, committed=10**9)
        with build_receiver(cfg, tmp_path, 0) as receiver:
            assert_same(receive(receiver, 0), make_batch(0, 0))
        assert sender.ready_steps() == 1  # no rogue commit released it
        for rogue in rogues:
            assert replies(rogue, ABSENT_S) == []


def test_zmq_receiver_ignores_a_server_without_the_runs_key(ctx, tmp_path):
    """A process squatting the port cannot feed the trainer: the handshake fails, no request
    reaches it and nothing it sends is taken."""
    port = free_port()
    squatter = ctx.socket(zmq.ROUTER)
    squatter.linger = 0
    squatter.bind(f"tcp://127.0.0.1:{port}")
    blob = transport_fs.encode(make_batch(0, 0))
    done = threading.Event()

    def serve() -> None:  # owns the socket
        try:
            while not done.is_set():
                if squatter.poll(50):
                    identity, request = squatter.recv_multipart()
                    head = {"id": json.loads(request)["id"], "step": 0, "rank": 0}
                    squatter.send_multipart([identity, json.dumps(head).encode(), blob])
        finally:
            squatter.close(linger=0)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    cfg = ZMQTransportConfig(port=port)
    try:
        with build_receiver(cfg, tmp_path, 0) as receiver:
            assert receiver.receive(0, stop_after(ABSENT_S), poll_s=0.02) is None
    finally:
        done.set()
        thread.join()


def test_zmq_message_over_the_size_cap_is_dropped_and_serving_goes_on(ctx, tmp_path):
    cfg = ZMQTransportConfig(port=free_port())
    with build_sender(cfg, tmp_path, 1) as sender:
        sender.send(0, 0, make_batch(0, 0))
        sock = peer(ctx, cfg.port, run_keys(tmp_path))
        pad = "x" * (2 * CONTROL_MAX_BYTES)  # a well-formed request, too big
        ask(sock, op="get", id=1, step=0, rank=0, committed=0, pad=pad)
        got, deadline, request_id = [], time.monotonic() + WAIT_S, 1
        while not got:  # libzmq dropped the connection; the peer reconnects and asks again
            assert time.monotonic() < deadline, "the server stopped serving"
            request_id += 1
            ask(sock, op="get", id=request_id, step=0, rank=0, committed=0)
            got = replies(sock, 0.5)
        with build_receiver(cfg, tmp_path, 0) as receiver:
            assert_same(receive(receiver, 0), make_batch(0, 0))
        got += replies(sock, ABSENT_S)
        assert all(head["id"] != 1 for head, _ in got)  # the oversized one is never answered
        assert_same(decode(got[0][1]), make_batch(0, 0))


def test_zmq_batch_over_the_size_cap_is_refused_at_send(tmp_path, monkeypatch):
    monkeypatch.setattr(transport_zmq, "MAX_BATCH_BYTES", 1000)
    cfg = ZMQTransportConfig(port=free_port())
    with build_sender(cfg, tmp_path, 1) as sender, pytest.raises(ValueError, match="bytes"):
        sender.send(0, 0, make_batch(0, 0))


def test_zmq_commit_past_the_last_step_sent_is_refused_and_batches_stay(ctx, tmp_path):
    cfg = ZMQTransportConfig(port=free_port())
    with build_sender(cfg, tmp_path, 1) as sender:
        for step in range(3):
            sender.send(step, 0, make_batch(step, 0))
        with build_receiver(cfg, tmp_path, 0) as confused:
            confused.commit(10**6)  # refused; its requests carry it too, refused as well
            assert_same(receive(confused, 0), make_batch(0, 0))
        sock = peer(ctx, cfg.port, run_keys(tmp_path))
        ask(sock, op="commit", rank=0, committed=10**9)
        head, _ = reply(sock)
        assert head["op"] == "commit" and "refused" in head["error"]
        ask(sock, op="get", id=1, step=1, rank=0, committed=4)  # served, the commit refused
        head, blob = reply(sock)
        assert head["id"] == 1 and "error" not in head
        assert_same(decode(blob), make_batch(1, 0))
        assert sender.ready_steps() == 3
        with build_receiver(cfg, tmp_path, 0) as receiver:
            for step in range(3):
                assert_same(receive(receiver, step), make_batch(step, 0))
            receiver.commit(3)  # past the last step consumed: accepted
            wait_for(lambda: sender.ready_steps() == 0)


def listening(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp writes them) listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as rows:
            for row in list(rows)[1:]:
                local, state = row.split()[1], row.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp")
@pytest.mark.parametrize(
    ("host", "bound", "listens"),
    [("127.0.0.2", "127.0.0.2", "0200007F"), ("localhost", "127.0.0.1", "0100007F")],
)
def test_zmq_listens_only_at_the_configured_host(tmp_path, host, bound, listens):
    cfg = ZMQTransportConfig(host=host, port=free_port())
    with build_sender(cfg, tmp_path, 1) as sender:
        assert listening(cfg.port) == {listens}  # never 00000000: every interface
        assert sender.endpoint == f"tcp://{bound}:{cfg.port}"
        sender.send(0, 0, make_batch(0, 0))
        with build_receiver(cfg, tmp_path, 0) as receiver:
            assert_same(receive(receiver, 0), make_batch(0, 0))


def test_zmq_run_key_is_private_made_once_and_checked(tmp_path):
    secret = run_secret(tmp_path)
    path = tmp_path / KEY_FILE
    assert len(secret) == 32 and run_secret(tmp_path) == secret
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    with pytest.raises(SetupError, match="others may read it"):
        run_secret(tmp_path)
    path.unlink()
    (tmp_path / "elsewhere").write_bytes(secret)
    (tmp_path / "elsewhere").chmod(0o600)
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SetupError, match="symbolic link"):
        run_secret(tmp_path)


@pytest.mark.parametrize("target_exists", [True, False])
def test_filesystem_write_never_follows_a_symlink_at_its_temp_path(tmp_path, target_exists):
    """The sender's temporary file name is predictable (pid, thread): a link planted there
    must not redirect the write, to an existing file or a new one."""
    run_dir, victim = tmp_path / "run", tmp_path / "victim"
    if target_exists:
        victim.write_bytes(b"precious")
    final = transport_fs.rank_file(run_dir, 0, 0)
    final.parent.mkdir(parents=True)
    planted = final.with_name(f".{final.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    planted.symlink_to(victim)
    sender = build_sender(FileSystemTransportConfig(type="filesystem"), run_dir, 1)
    sender.send(0, 0, make_batch(0, 0))
    if target_exists:
        assert victim.read_bytes() == b"precious"
    else:
        assert not victim.exists()
    assert not final.is_symlink() and stat.S_IMODE(final.stat().st_mode) == 0o600
    assert_same(decode(final.read_bytes()), make_batch(0, 0))
    assert not planted.exists() and not planted.is_symlink()
