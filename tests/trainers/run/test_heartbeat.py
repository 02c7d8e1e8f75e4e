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
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
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


def test_off_and_bad_urls():
    off = Heartbeat(None)
    off.beat(1)
    off.close()
    assert off.sent == off.failures == 0
    with pytest.raises(SetupError) as info:
        Heartbeat(heartbeat_cfg("uptime.example.com/ping"))
    assert info.value.path == "heartbeat.url"
