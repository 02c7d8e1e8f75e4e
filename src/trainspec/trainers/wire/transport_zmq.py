"""The ZeroMQ rollout transport: the orchestrator serves batches from memory, trainer ranks ask.

The orchestrator's `ZMQSender` binds a ROUTER socket on `port` at the address of `host`, the
address the trainers connect to: localhost (and '', '*', '0.0.0.0', which the trainers reach as
localhost) binds 127.0.0.1, any other name or address binds what it resolves to here, never
every interface. Each trainer rank's `ZMQReceiver` connects a DEALER socket and asks for one
step at a time:

    receiver -> sender   {"op": "get", "id": k, "step": n, "rank": r, "committed": c}
    receiver -> sender   {"op": "commit", "rank": r, "committed": c}
    sender -> receiver   {"id": k, "step": n, "rank": r}  +  batch.encode(batch)
                         {"id": k, ..., "error": why}  +  b""   (step n was committed: gone)
                         {"op": "commit", ..., "error": why}  +  b""   (a commit refused)

Security (a shared cluster: anyone may reach the port; the why is in zmq_security.py): both ends
use CURVE with key pairs derived from the run's secret, a 0600 file in the run directory; the
orchestrator admits only the trainers' public key (a ZAP handler on its thread) and a trainer
only talks to a server holding the server's secret key. Limits: the orchestrator reads messages
of at most CONTROL_MAX_BYTES (MAXMSGSIZE: libzmq drops the connection of a peer that sends more;
it reconnects), a trainer batches of at most MAX_BATCH_BYTES (`send()` refuses a larger one). A
commit (on its own or carried on a request) past the step after the last one sent for the rank
is refused: nothing is released and a `commit` gets an error reply, which the receiver logs (a
trainer ahead of a restarted orchestrator is refused only until the steps are sent again).

Exactly once, in order, restart-safe:
- `send()` only stores the blob (under a lock) and wakes the sender's thread through an inproc
  PAIR socket; that thread alone owns the ROUTER socket. It answers a request as soon as the
  batch is there and keeps unanswered requests pending until `send()` brings it.
- A sent batch stays in memory until a commit says the rank is past it (`Receiver.commit`, sent
  at once and carried on every request as well, or `Sender.commit`), never merely because it was
  delivered: a trainer that crashes and resumes from an earlier checkpoint asks again, from a new
  socket with a new identity, and gets the same bytes.
- A receiver only accepts the reply to its latest request id, so replies to abandoned or
  repeated requests are dropped. It resends its request on every (re)connect, so one lost with
  a broken connection or a restarted orchestrator is asked again; the sender ignores a request
  id it has already seen on the same connection.
- After returning step n the receiver asks for n + 1 straight away, so the next batch crosses
  the network while step n trains.

High-water mark: `hwm` bounds the batch direction (the ROUTER's SNDHWM, the DEALER's RCVHWM);
the tiny requests and commits flowing the other way get a roomy fixed queue (CONTROL_HWM) so a
commit is not lost to a small `hwm`. Replies only answer requests and a receiver has one request
out, so a peer's queue holds about one batch; when it is full the sender keeps the reply pending
and retries (ROUTER would otherwise drop it silently). `send()` never blocks: batches are held
until committed (a resume may need them), and bounding how far the orchestrator runs ahead is
its own job (`Sender.ready_steps`). A request or commit that still finds its queue full is
retried while the receiver waits (a later request carries the commit too).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import threading

import zmq
from zmq.utils import z85

from ..errors import SetupError
from .batch import RolloutBatch, encode
from .endpoints import Sender
from .zmq_security import (
    CONTROL_MAX_BYTES,
    CURVE_OVERHEAD,
    MAX_BATCH_BYTES,
    bind_address,
    curve_keys,
    require_curve,
)

logger = logging.getLogger(__name__)

RETRY_MS = 50  # how soon the sender retries a reply that met a full queue
CONTROL_HWM = 1000  # queue for requests and commits (receiver -> sender): small messages
ZAP_ENDPOINT = "inproc://zeromq.zap.01"  # where libzmq asks who may connect (RFC 27)
ZAP_DOMAIN = b"trainspec-rollouts"


class ZMQSender(Sender):
    """Stores sent batches until committed and serves trainer requests from a background
    thread that owns the ROUTER socket (and answers libzmq's ZAP requests)."""

    def __init__(self, host: str, port: int, hwm: int, ranks: int, secret: bytes) -> None:
        if ranks < 1:
            raise ValueError(f"ranks must be at least 1, got {ranks}")
        require_curve()
        address = bind_address(host, port)
        self.ranks = ranks
        self._lock = threading.Lock()  # guards _batches, _committed, _sent, _closed and _wake
        self._batches: dict[tuple[int, int], bytes] = {}  # (step, rank) -> blob
        self._committed = [0] * ranks  # per rank: steps below are released
        self._sent = [-1] * ranks  # per rank: the last step sent
        self._closed = False
        self._error: BaseException | None = None
        # owned by the thread: (step, rank) -> {identity: request id}; identity -> last id seen
        self._pending: dict[tuple[int, int], dict[bytes, int]] = {}
        self._seen: dict[bytes, int] = {}
        self._refused = 0  # connections ZAP refused
        self._client_key = z85.decode(curve_keys(secret, "client")[0])  # the one admitted
        public, private = curve_keys(secret, "server")

        self._ctx = zmq.Context()
        zap = self._ctx.socket(zmq.REP)  # bound before the ROUTER can take a connection
        zap.setsockopt(zmq.LINGER, 0)
        zap.bind(ZAP_ENDPOINT)
        router = self._ctx.socket(zmq.ROUTER)
        for option, value in (
            (zmq.LINGER, 0),
            (zmq.SNDHWM, hwm),
            (zmq.RCVHWM, CONTROL_HWM),
            (zmq.MAXMSGSIZE, CONTROL_MAX_BYTES + CURVE_OVERHEAD),
            (zmq.ROUTER_MANDATORY, 1),  # raise, rather than drop, on full/gone peers
            (zmq.CURVE_SERVER, 1),
            (zmq.ZAP_ENFORCE_DOMAIN, 1),  # no ZAP handler: nobody gets in
        ):
            router.setsockopt(option, value)
        router.curve_secretkey, router.curve_publickey = private, public
        router.zap_domain = ZAP_DOMAIN
        try:
            router.bind(address)
        except zmq.ZMQError as error:
            router.close()
            zap.close()
            self._ctx.term()
            raise SetupError(
                "rollout_transport.port",
                f"cannot listen on {address}: {error}",
                "pick a free port, or stop the process that holds it; rollout_transport.host "
                "must name this node (the orchestrator's)",
            ) from error
        self.endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
        endpoint = f"inproc://rollout-sender-wake-{id(self)}"
        thread_wake = self._ctx.socket(zmq.PAIR)
        thread_wake.bind(endpoint)
        self._wake = self._ctx.socket(zmq.PAIR)
        self._wake.setsockopt(zmq.LINGER, 0)
        self._wake.connect(endpoint)
        self._thread = threading.Thread(
            target=self._serve, args=(router, thread_wake, zap), name="rollout-sender", daemon=True
        )
        self._thread.start()

    def send(self, step: int, rank: int, batch: RolloutBatch) -> None:
        if step < 0 or not 0 <= rank < self.ranks:
            raise ValueError(f"no step {step} of rank {rank} with {self.ranks} ranks")
        blob = encode(batch)
        if len(blob) > MAX_BATCH_BYTES:  # the trainer would drop it, and ask again forever
            raise ValueError(
                f"step {step}'s batch for rank {rank} is {len(blob)} bytes, more than the "
                f"ZeroMQ transport carries ({MAX_BATCH_BYTES}): make the step's batch smaller, "
                "or use the filesystem transport"
            )
        with self._lock:
            if self._closed:
                raise RuntimeError("the rollout sender is closed")
            if self._error is not None:
                raise RuntimeError("the rollout sender's thread failed") from self._error
            self._sent[rank] = max(self._sent[rank], step)
            if step < self._committed[rank]:
                logger.warning(
                    "dropping step %d of rank %d: the trainer committed past it", step, rank
                )
                return
            self._batches[(step, rank)] = blob
            self._signal()

    def ready_steps(self) -> int:
        with self._lock:
            return len({step for step, _ in self._batches})

    def commit(self, step: int) -> None:
        for rank in range(self.ranks):
            self._release(rank, step)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._signal()
        self._thread.join()
        self._wake.close(linger=0)
        self._ctx.term()
        self._batches.clear()

    def _signal(self) -> None:
        """Wake the thread (call with the lock held); one pending wake-up is enough."""
        with contextlib.suppress(zmq.Again):
            self._wake.send(b"", zmq.NOBLOCK)

    def _release(self, rank: int, committed: int, *, bounded: bool = False) -> str | None:
        """Release the rank's batches below `committed`; `bounded` (a trainer's commit): refuse,
        saying why, a commit past the step after the last one sent."""
        with self._lock:
            if bounded and committed > self._sent[rank] + 1:
                return (
                    f"rank {rank} committed step {committed} but the last step sent is "
                    f"{self._sent[rank]}: refused, no batch released"
                )
            if committed <= self._committed[rank]:
                return None
            self._committed[rank] = committed
            for key in [key for key in self._batches if key[1] == rank and key[0] < committed]:
                del self._batches[key]
        return None

    # --- everything below runs on the sender's thread ---

    def _serve(self, router: zmq.Socket, wake: zmq.Socket, zap: zmq.Socket) -> None:
        poller = zmq.Poller()
        for sock in (router, wake, zap):
            poller.register(sock, zmq.POLLIN)
        retry = False
        try:
            while True:
                events = dict(poller.poll(RETRY_MS if retry else None))
                if wake in events:
                    while wake.poll(0):
                        wake.recv()
                    if self._closed:
                        return
                if zap in events:
                    while zap.poll(0):
                        self._authorize(zap)
                if router in events:
                    while router.poll(0):
                        self._handle(router, router.recv_multipart())
                retry = self._answer(router)
        except Exception as error:  # reported through send()
            logger.exception("the rollout sender's thread failed")
            self._error = error
        finally:
            router.close(linger=0)
            wake.close(linger=0)
            zap.close(linger=0)

    def _authorize(self, zap: zmq.Socket) -> None:
        """Answer one ZAP request: a CURVE client holding the trainers' key may connect."""
        frames = zap.recv_multipart()
        request_id = frames[1] if len(frames) > 1 else b""
        admitted = (
            len(frames) == 7
            and frames[0] == b"1.0"
            and frames[5] == b"CURVE"
            and hmac.compare_digest(frames[6], self._client_key)
        )
        if not admitted:
            self._refused += 1
            if self._refused & (self._refused - 1) == 0:  # 1, 2, 4, ...: a retrying peer
                logger.warning(
                    "refused %d rollout transport connection(s): not this run's key",
                    self._refused,
                )
        status = (b"200", b"OK") if admitted else (b"400", b"not this run's key")
        zap.send_multipart([b"1.0", request_id, *status, b"", b""])

    def _handle(self, router: zmq.Socket, frames: list[bytes]) -> None:
        """Record one receiver message: its commit, and for a request, what it waits for."""
        try:
            identity, payload = frames
            if len(payload) > CONTROL_MAX_BYTES:
                raise ValueError(f"{len(payload)} bytes")
            message = json.loads(payload)
            op, rank, committed = message["op"], int(message["rank"]), int(message["committed"])
            request = (int(message["id"]), int(message["step"])) if op == "get" else None
            if op not in ("get", "commit") or not 0 <= rank < self.ranks:
                raise ValueError(f"op {op!r}, rank {rank}")
            if request is not None and request[1] < 0:
                raise ValueError(f"step {request[1]}")
        except (ValueError, KeyError, TypeError) as error:
            logger.warning("ignoring a malformed rollout request (%s)", error)
            return
        refused = self._release(rank, committed, bounded=True)
        if refused is not None:
            logger.warning("%s", refused)
            if request is None:  # a commit on its own is answered
                reply = {"op": "commit", "rank": rank, "committed": committed, "error": refused}
                with contextlib.suppress(zmq.ZMQError):  # full or gone: the log says it
                    router.send_multipart([identity, json.dumps(reply).encode(), b""], zmq.NOBLOCK)
        if request is None:
            return
        request_id, step = request
        if request_id <= self._seen.get(identity, -1):
            return  # resent on reconnect but arrived over this same connection already
        self._seen[identity] = request_id
        for waiting in self._pending.values():  # the receiver now waits for this request only
            waiting.pop(identity, None)
        self._pending.setdefault((step, rank), {})[identity] = request_id

    def _answer(self, router: zmq.Socket) -> bool:
        """Reply to every pending request whose batch is there (or was committed away);
        True when a reply met a full queue and must be retried."""
        retry = False
        for key in list(self._pending):
            step, rank = key
            with self._lock:
                blob = self._batches.get(key)
                gone = step < self._committed[rank]
            if blob is None and not gone:
                continue
            header: dict[str, int | str] = {"step": step, "rank": rank}
            if blob is None:
                header["error"] = f"step {step} of rank {rank} was committed and is gone"
            waiting = self._pending[key]
            for identity, request_id in list(waiting.items()):
                head = json.dumps({**header, "id": request_id}).encode()
                try:
                    router.send_multipart([identity, head, blob or b""], zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    retry = True
                    continue
                except zmq.ZMQError as error:
                    if error.errno != zmq.EHOSTUNREACH:
                        raise
                    self._seen.pop(identity, None)  # that receiver is gone
                del waiting[identity]
            if not waiting:
                del self._pending[key]
        return retry
