"""The trainer's side of the ZeroMQ rollout transport: one DEALER socket per rank that asks for
each step and waits for its reply (the protocol is in transport_zmq.py). It is a CURVE client
with the trainers' key pair and talks only to the server holding the run's server key
(zmq_security.py); it reads batches of at most MAX_BATCH_BYTES."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import zmq
from zmq.utils.monitor import recv_monitor_message

from .batch import RolloutBatch, decode
from .endpoints import Receiver
from .transport_zmq import CONTROL_HWM
from .zmq_security import (
    CONTROL_MAX_BYTES,
    CURVE_OVERHEAD,
    MAX_BATCH_BYTES,
    connect_address,
    curve_keys,
    require_curve,
)

logger = logging.getLogger(__name__)


class ZMQReceiver(Receiver):
    """One trainer rank's DEALER socket: asks for each step and waits for its reply."""

    def __init__(self, host: str, port: int, hwm: int, rank: int, secret: bytes) -> None:
        if rank < 0:
            raise ValueError(f"rank must not be negative, got {rank}")
        require_curve()
        self.rank = rank
        self._committed = 0
        self._last_id = 0
        self._want: tuple[int, int] | None = None  # (request id, step) of the request out
        self._unsent = False  # the request out could not be queued yet
        self._commit_unsent = False  # nor the latest commit
        self._closed = False
        self._ctx = zmq.Context()
        self._socket = self._ctx.socket(zmq.DEALER)
        for option, value in (
            (zmq.LINGER, 0),
            (zmq.SNDHWM, CONTROL_HWM),
            (zmq.RCVHWM, hwm),
            (zmq.MAXMSGSIZE, MAX_BATCH_BYTES + CURVE_OVERHEAD),
        ):
            self._socket.setsockopt(option, value)
        self._socket.curve_serverkey = curve_keys(secret, "server")[0]
        public, private = curve_keys(secret, "client")
        self._socket.curve_publickey, self._socket.curve_secretkey = public, private
        self._monitor = self._socket.get_monitor_socket(zmq.EVENT_CONNECTED)
        self._socket.connect(connect_address(host, port))
        self._poller = zmq.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)

    def receive(
        self, step: int, should_stop: Callable[[], bool], poll_s: float = 0.1
    ) -> RolloutBatch | None:
        if self._closed:
            raise RuntimeError("the rollout receiver is closed")
        if self._want is None or self._want[1] != step:
            self._last_id += 1
            self._want = (self._last_id, step)
            self._send_request()
        while True:
            events = dict(self._poller.poll(max(1, int(poll_s * 1000))))
            if self._monitor in events and self._reconnected():
                self._send_request()  # the request may have been lost with the old connection
            self._flush()
            if self._socket in events:
                batch = self._take_reply()
                if batch is not None:
                    self._last_id += 1
                    self._want = (self._last_id, step + 1)  # prefetch the next step
                    self._send_request()
                    return batch
            if should_stop():
                return None

    def commit(self, step: int) -> None:
        self._committed = max(self._committed, step)
        message = {"op": "commit", "rank": self.rank, "committed": self._committed}
        self._commit_unsent = not self._send(message)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._socket.disable_monitor()
        self._monitor.close(linger=0)
        self._socket.close(linger=0)
        self._ctx.term()

    def _send_request(self) -> None:
        assert self._want is not None
        request_id, step = self._want
        message = {"op": "get", "id": request_id, "step": step, "rank": self.rank}
        self._unsent = not self._send({**message, "committed": self._committed})
        self._commit_unsent = self._commit_unsent and self._unsent

    def _flush(self) -> None:
        """Queue what met a full queue before."""
        if self._commit_unsent:
            self.commit(self._committed)
        if self._unsent:
            self._send_request()

    def _send(self, message: dict) -> bool:
        try:
            self._socket.send(json.dumps(message).encode(), zmq.NOBLOCK)
            return True
        except zmq.Again:
            return False

    def _reconnected(self) -> bool:
        connected = False
        while self._monitor.poll(0):
            event = recv_monitor_message(self._monitor)
            connected = connected or event["event"] == zmq.EVENT_CONNECTED
        return connected

    def _take_reply(self) -> RolloutBatch | None:
        """The batch answering the request out, if it arrived; other replies are dropped."""
        while self._socket.poll(0):
            frames = self._socket.recv_multipart(copy=False)
            if len(frames) != 2 or len(frames[0]) > CONTROL_MAX_BYTES:
                continue
            header = json.loads(frames[0].bytes)
            if header.get("op") == "commit":  # the sender refused a commit: nothing released
                logger.warning("rank %d: %s", self.rank, header.get("error"))
                continue
            if self._want is None or header.get("id") != self._want[0]:
                continue  # answers a request this receiver no longer waits for
            if "error" in header:
                raise RuntimeError(f"rank {self.rank}: {header['error']}")
            return decode(frames[1].bytes)
        return None
