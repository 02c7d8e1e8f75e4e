"""The HTTP side of the local model server (model_server.py): a threading server sized for a
sampler's burst, a handler that answers JSON, and the error a route answers with (what a
request's fields may hold is request_fields.py).

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            self.answer(lambda: {"echo": self.read_json()})   # or raise RequestError(400, ...)

    httpd = HttpServer(("127.0.0.1", 0), Handler)   # port 0: a free one, httpd.server_address[1]

A client cannot hold the server: each connection has a socket timeout (a client silent that
long, mid-request or mid-body, is dropped); a Content-Length that is not a byte count is a 400
and one over the cap a 413, both before any of the body is read; whatever goes wrong inside a
route is answered, a RequestError with its status, anything unexpected with a JSON 500 (the
exception's type and message; the traceback goes to the server's log, not the client).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ...errors import SetupError

log = logging.getLogger("trainspec.model_server")
BYTE_COUNT = re.compile(r"[0-9]{1,20}")
_BUSY_BODY = b'{"error": {"message": "this server serves as many connections as it can: retry"}}'
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(_BUSY_BODY)).encode() + b"\r\n\r\n"
    + _BUSY_BODY
)  # fmt: skip


class HttpServer(ThreadingHTTPServer):
    """http.server's threading server with a listen backlog for a sampler's burst: the
    orchestrator sends one request per prompt at once (up to its in-flight cap), and the
    standard backlog of 5 has the kernel reset the connections that overflow it. At most
    `max_connections` are served at once (a thread each): one past that is answered 503 and
    closed, so that clients cannot have it start threads without end."""

    request_queue_size = 1024
    daemon_threads = True
    max_connections = 1024

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(self.max_connections)

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):  # a client gone already: nothing to tell it
                request.sendall(BUSY)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread took it
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class RequestError(Exception):
    """A request answered with `status` and {"error": {"message": ...}}."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler whose bodies are JSON objects, both ways, and that logs nothing but
    its failures (the orchestrator logs what matters). `timeout` is each connection's socket
    timeout; `max_body_bytes` the largest body read."""

    timeout = 30.0
    max_body_bytes = 32 << 20

    def read_body(self) -> bytes:
        """The request's body, b"" when none; a RequestError (400, 413) for a Content-Length
        that is not a byte count or is over `max_body_bytes`, before any of it is read."""
        given = self.headers.get_all("Content-Length") or []
        if not given:
            return b""
        text = given[0].strip()
        if len(given) > 1 or not BYTE_COUNT.fullmatch(text):
            self.close_connection = True  # the body's end is unknown: nothing more is read
            shown = ", ".join(repr(v) for v in given)
            raise RequestError(400, f"Content-Length {shown} is not one byte count")
        length = int(text)
        if length > self.max_body_bytes:
            self.close_connection = True
            raise RequestError(
                413, f"the body is {length} bytes; this server reads at most {self.max_body_bytes}"
            )
        return self.rfile.read(length)

    def read_json(self) -> dict[str, Any]:
        """The request's body as a JSON object (none: {}); json.JSONDecodeError when it is not
        JSON, RequestError(400) when not an object."""
        body = json.loads(self.read_body() or b"{}")
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        return body

    def answer(self, route: Callable[[], dict[str, Any]]) -> None:
        """Send what `route` returns (200) or why it failed: a RequestError with its status,
        a body that is not JSON or a bad value (SetupError, ValueError) with 400, anything else
        with 500 and its traceback in the log. A client that stalled is dropped unanswered."""
        try:
            status, payload = 200, route()
        except RequestError as exc:
            status, payload = exc.status, {"error": {"message": str(exc)}}
        except json.JSONDecodeError as exc:
            status, payload = 400, {"error": {"message": f"the body is not JSON: {exc}"}}
        except (SetupError, ValueError) as exc:
            status, payload = 400, {"error": {"message": str(exc)}}
        except TimeoutError:
            raise  # http.server drops the connection
        except Exception as exc:  # noqa: BLE001 - any route's bug: answered, and logged here
            log.error("%s %s failed", self.command, self.path, exc_info=exc)
            first = (str(exc).splitlines() or [""])[0][:300]
            message = f"internal error: {type(exc).__name__}: {first} (the server's log says more)"
            status, payload = 500, {"error": {"message": message}}
        self.send_json(status, payload)

    def send_json(self, status: int, answer: dict) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # quiet: the orchestrator logs what matters
        pass
