"""Heartbeat against a real HTTP server on 127.0.0.1, a closed port, and a stalled endpoint."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from trainspec.config import load
from trainspec.trainers.errors import SetupError
from trainspec.trainers.orchestrator.sampling.http_server import HttpServer
from trainspec.trainers.run.heartbeat import Heartbeat

WAIT_S = 60  # an upper bound on waiting for a thread, never a measured time


def wait_until(condition) -> None:
    done = threading.Event()
    for _ in range(WAIT_S * 100):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError("the condition never came true")


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def heartbeat_cfg(url):
    return load("sft", [], {"heartbeat": {"url": url}}).config.heartbeat


class Server:
    """A local endpoint that records every request; `gate` holds requests until it is set."""

    def __init__(self, status=200):
        self.paths: list[str] = []
        self.arrived = threading.Semaphore(0)
        self.gate = threading.Event()
        self.gate.set()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server.paths.append(self.path)
                server.arrived.release()
                server.gate.wait(WAIT_S)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.httpd = HttpServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/ping/trainer-1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    server = Server()
    yield server
    server.close()


def test_beats_reach_the_endpoint(server):
    heartbeat = Heartbeat(heartbeat_cfg(server.url))
    heartbeat.beat(1)
    assert server.arrived.acquire(timeout=WAIT_S)
    heartbeat.close(wait_s=WAIT_S)
    assert server.paths[0] == "/ping/trainer-1"
    assert heartbeat.sent >= 1 and heartbeat.failures == 0


def test_a_stalled_endpoint_never_blocks_a_step(server):
    server.gate.clear()  # the endpoint accepts the request and then hangs
    heartbeat = Heartbeat(heartbeat_cfg(server.url))
    heartbeat.beat(1)
    assert server.arrived.acquire(timeout=WAIT_S)
    for step in range(2, 50):  # returns at once although the first request is still open
        heartbeat.beat(step)
    server.gate.set()
    heartbeat.close(wait_s=WAIT_S)
    assert 1 <= len(server.paths) <= 2  # the queued beats collapsed into one


def test_closed_port_is_counted_not_raised(caplog):
    port = closed_port()
    heartbeat = Heartbeat(heartbeat_cfg(f"http://127.0.0.1:{port}/ping"))
    heartbeat.beat(1)
    heartbeat.close(wait_s=WAIT_S)
    assert heartbeat.failures == 1 and heartbeat.sent == 0
    assert "heartbeat to" in caplog.text and "training goes on" in caplog.text


def test_failures_warn_once_then_count(caplog):
    server = Server(status=500)
    try:
        heartbeat = Heartbeat(heartbeat_cfg(server.url))
        for step in range(1, 4):
            heartbeat.beat(step)
            assert server.arrived.acquire(timeout=WAIT_S)
            wait_until(lambda step=step: heartbeat.failures >= step)  # this request is done
        heartbeat.close(wait_s=WAIT_S)
    finally:
        server.close()
    assert heartbeat.failures == 3
    assert caplog.text.count("heartbeat to") == 1


def test_an_answer_whose_body_never_ends_holds_nothing_up():
    """The endpoint answers 200 and then sends its body a byte at a time, forever: the beat is
    done once the status is in (a body read to its end never would be)."""
    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 40))
            self.end_headers()
            while not stop.is_set():
                self.wfile.write(b"x")
                self.wfile.flush()
                stop.wait(0.5)  # under the beat's timeout: each read gets a byte in time

        def log_message(self, *args):
            pass

    httpd = HttpServer(("127.0.0.1", 0), Trickle)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        heartbeat = Heartbeat(heartbeat_cfg(f"http://127.0.0.1:{httpd.server_address[1]}/"))
        heartbeat.beat(1)
        wait_until(lambda: heartbeat.sent == 1)
        heartbeat.close(wait_s=WAIT_S)
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()
    assert heartbeat.failures == 0


def test_messages_never_show_the_urls_token(caplog):
    port = closed_port()
    heartbeat = Heartbeat(heartbeat_cfg(f"http://user:pw@127.0.0.1:{port}/ping/s3cret?k=t0ken"))
    heartbeat.beat(1)
    heartbeat.close(wait_s=WAIT_S)
    assert heartbeat.failures == 1
    assert f"heartbeat to http://127.0.0.1:{port}/… failed" in caplog.text
    assert "s3cret" not in caplog.text and "t0ken" not in caplog.text and "pw@" not in caplog.text
    with pytest.raises(SetupError) as info:
        Heartbeat(heartbeat_cfg("uptime.example.com/ping/s3cret"))
    assert "s3cret" not in info.value.problem


def test_off_and_bad_urls():
    off = Heartbeat(None)
    off.beat(1)
    off.close()
    assert off.sent == off.failures == 0
    with pytest.raises(SetupError) as info:
        Heartbeat(heartbeat_cfg("uptime.example.com/ping"))
    assert info.value.path == "heartbeat.url"
