"""Liveness pings to an external monitor, built from `[heartbeat]`.

    heartbeat = Heartbeat(config.heartbeat)   # null: off
    heartbeat.beat(step)                      # after every step; returns at once
    heartbeat.close()

Each beat is an HTTP GET of `url`, sent by one background thread with a short timeout, so a
slow or dead endpoint never holds up a step. Beats that arrive while a request is in flight
collapse into one (the monitor only needs to hear that the trainer is alive). A failure is
logged once as a warning and later ones are only counted (`failures`); nothing here ever raises
into the training loop. A URL that is not http(s) is refused up front (SetupError). The answer's
status is all a beat reads (a body that never ends holds nothing up), and messages show the URL
as scheme and host only: its path or query may be the monitor's token.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
import urllib.request

from ..errors import SetupError

logger = logging.getLogger(__name__)

TIMEOUT_S = 5.0


class Heartbeat:
    """Background HTTP pings; see the module docstring."""

    def __init__(self, heartbeat_cfg, *, timeout_s: float = TIMEOUT_S) -> None:
        self.url: str | None = heartbeat_cfg.url if heartbeat_cfg is not None else None
        if self.url is not None:
            parts = urllib.parse.urlsplit(self.url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise SetupError(
                    "heartbeat.url",
                    "the URL is not an http(s) URL (it starts "
                    f"{self.url[: min(len(self.url) // 2, 12)]!r}…)",
                    'write the full URL, e.g. "https://uptime.example.com/ping/trainer-1"',
                )
        self.timeout_s = timeout_s
        self.sent = 0  # requests answered with a 2xx/3xx status
        self.failures = 0
        self._warned = False
        self._pending = False  # a beat is waiting to be sent
        self._closed = False
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def beat(self, step: int) -> None:
        """Ask for a ping saying that `step` finished; never blocks, never raises."""
        if self.url is None or self._closed:
            return
        try:
            with self._wake:
                self._pending = True
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, args=(self.url,), name="trainspec-heartbeat", daemon=True
                    )
                    self._thread.start()
                self._wake.notify()
        except Exception as exc:  # e.g. no more threads: heartbeats are never worth a crash
            self._failed(exc)

    def _run(self, url: str) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._closed:
                    self._wake.wait()
                if not self._pending:  # closed, nothing left to send
                    return
                self._pending = False
            self._send(url)

    def _send(self, url: str) -> None:
        request = urllib.request.Request(
            url, method="GET", headers={"User-Agent": "trainspec-heartbeat"}
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s):
                pass  # the status is the answer: the body is never read
        except Exception as exc:
            self._failed(exc)
            return
        self.sent += 1

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        if not self._warned:
            self._warned = True
            logger.warning(
                "heartbeat to %s failed (%s); training goes on, later failures are only counted",
                shown_url(self.url or ""),
                str(exc).replace(self.url or "", shown_url(self.url or "")),
            )

    def close(self, wait_s: float = 2.0) -> None:
        """Send the last pending beat if it goes quickly, then stop the thread."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=wait_s)
        if self.failures:
            logger.info(
                "heartbeat: %d of %d pings failed", self.failures, self.failures + self.sent
            )

    def __enter__(self) -> Heartbeat:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def shown_url(url: str) -> str:
    """`url` as messages show it: scheme and host (a token in the user, path or query stays
    out of logs)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    return f"{parts.scheme}://{host}/…"
