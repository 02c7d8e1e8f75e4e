"""The local model server (orchestrator/sampling/model_server.py) against bad clients, on real
sockets on 127.0.0.1: a Content-Length that is no byte count or too large is answered at once
without reading the body, a silent client is dropped while others are served, every field a
client could blow up is capped, token ids are checked against the vocabulary, anything
unexpected is a JSON 500 (logged here, no traceback to the client), and `/update_weights`
loads only under its weights root.

No timing is asserted: a client's generous timeout (CLIENT_S) only stands between a server
that would hold the connection and a test that would hang."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import threading
import time

import httpx
import pytest
import torch

from trainspec.trainers.orchestrator.environments.token_route import TokenRoute
from trainspec.trainers.orchestrator.sampling.model_server import (
    ModelServer,
)
from trainspec.trainers.orchestrator.sampling.model_server import load as load_sampler
from trainspec.trainers.orchestrator.sampling.request_fields import Limits

torch.set_num_threads(1)
CLIENT_S = 60.0  # how long a test waits for an answer (the server's own timeout: SERVER_S)
SERVER_S = 3.0
VOCAB = 260  # the built-in tiny model's


@pytest.fixture(scope="module")
def model_dir(tiny_weights):
    return tiny_weights(0)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The server's weights root: a run's broadcasts directory."""
    return tmp_path_factory.mktemp("broadcasts")


@pytest.fixture(scope="module")
def server(model_dir, root):
    limits = Limits(timeout_s=SERVER_S)
    served = ModelServer(load_sampler(str(model_dir), "cpu"), "tiny", weights_root=root,
                         limits=limits).start()  # fmt: skip
    yield served
    served.close()


def url(server, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


def raw(port: int, data: bytes) -> tuple[int, dict]:
    """Send `data` on a connection left open for writing, and read the answer to the server's
    close: (status, JSON body). A server that waits for more fails the test (socket.timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_S) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def post_head(length: str) -> bytes:
    return (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + length.encode() + b"\r\n\r\n"
    )


@pytest.mark.parametrize("length", ["-1", "ten", "+5", "1_0", "5, 5"])
def test_a_content_length_that_is_no_byte_count_is_a_400_at_once(server, length):
    """-1 had the server read to the end of a stream the client keeps open."""
    status, body = raw(server.port, post_head(length))
    assert status == 400
    assert "Content-Length" in body["error"]["message"] and "byte count" in body["error"]["message"]


def test_a_huge_content_length_is_a_413_with_nothing_read(server):
    status, body = raw(server.port, post_head(str(10**12)))
    assert status == 413
    assert f"{10**12} bytes" in body["error"]["message"]
    assert str(Limits().max_body_bytes) in body["error"]["message"]


@pytest.mark.parametrize(
    "partial",
    [
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le",  # silent mid-headers
        post_head("100") + b'{"prompt": ',  # silent mid-body
    ],
)
def test_a_silent_client_is_dropped_and_the_others_are_served(server, partial):
    with socket.create_connection(("127.0.0.1", server.port), timeout=CLIENT_S) as sock:
        sock.sendall(partial)
        assert httpx.get(url(server, "/health"), timeout=CLIENT_S).status_code == 200
        assert sock.recv(1024) == b""  # the server closed it, unanswered


def test_connections_past_the_cap_are_answered_503_and_the_server_goes_on(monkeypatch):
    """Clients that connect and say nothing hold a thread each until their timeout: past
    max_connections the next is answered 503 at once (no thread), and once one is gone a
    request is served again."""
    from trainspec.trainers.orchestrator.sampling.http_server import HttpServer, JsonHandler

    class Health(JsonHandler):
        def do_GET(self) -> None:
            self.answer(lambda: {"ok": True})

    monkeypatch.setattr(HttpServer, "max_connections", 3)
    httpd = HttpServer(("127.0.0.1", 0), Health)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    # accepted in the order they connect: the three held ones first, each on its thread
    held = [socket.create_connection(("127.0.0.1", port), timeout=CLIENT_S) for _ in range(3)]
    try:
        busy = httpx.get(f"http://127.0.0.1:{port}/", timeout=CLIENT_S)
        assert busy.status_code == 503 and "retry" in busy.json()["error"]["message"]
        held.pop().close()
        deadline = time.monotonic() + CLIENT_S
        while (
            answer := httpx.get(f"http://127.0.0.1:{port}/", timeout=CLIENT_S)
        ).status_code == 503:
            assert time.monotonic() < deadline, "the freed slot was never taken again"
            time.sleep(0.1)
        assert answer.json() == {"ok": True}
    finally:
        for sock in held:
            sock.close()
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"prompt": [1], "n": 129, "max_tokens": 1},
         "n = 129 is over this server's cap of 128 completions per prompt"),
        ({"prompt": [1], "max_tokens": 32769},
         "max_tokens = 32769 is over this server's cap of 32768 tokens"),
        ({"prompt": [[1]] * 1025, "max_tokens": 1},
         "prompt: 1025 prompts is over this server's cap of 1024 prompts per request"),
        ({"prompt": [1] * 2049, "max_tokens": 1},  # the model's length, under the cap's 32768
         "prompt 0: 2049 tokens is over this server's cap of 2048 tokens per prompt"),
        ({"prompt": [1], "seed": 2**64}, "seed = 18446744073709551616 must lie in"),
        ({"prompt": [1], "stop_token_ids": [[1]]}, "stop_token_ids must be a list of token ids"),
        ({"prompt": [1], "stop_token_ids": 5}, "stop_token_ids must be a list of token ids"),
    ],
)  # fmt: skip
def test_what_a_request_may_ask_is_capped_with_the_field_named(server, body, words):
    answer = httpx.post(url(server, "/v1/completions"), json=body, timeout=CLIENT_S)
    assert answer.status_code == 400
    assert words in answer.json()["error"]["message"]


def test_a_temperature_that_is_not_finite_is_a_400(server):
    content = b'{"prompt": [1], "max_tokens": 1, "temperature": Infinity}'
    answer = httpx.post(url(server, "/v1/completions"), content=content, timeout=CLIENT_S)
    assert answer.status_code == 400
    assert "temperature must be a number" in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        ("/v1/completions", {"prompt": [1, VOCAB]}, f"token id {VOCAB} is outside"),
        ("/v1/completions", {"prompt": [[1], [-1]]}, "prompt 1: token id -1 is outside"),
        ("/v1/completions", {"prompt": [1], "stop_token_ids": [VOCAB + 5]}, "stop_token_ids"),
        ("/inference/v1/generate", {"token_ids": [5, 10**6]}, "token id 1000000 is outside"),
    ],
)
def test_token_ids_outside_the_vocabulary_are_a_400(server, path, body, words):
    """They were an IndexError in the model's embedding: the connection dropped unanswered."""
    answer = httpx.post(url(server, path), json={**body, "max_tokens": 1}, timeout=CLIENT_S)
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert words in message and f"(0 to {VOCAB - 1})" in message


@pytest.mark.parametrize("error", [TypeError, IndexError, OSError])
def test_anything_unexpected_is_a_json_500_and_logged_here(server, monkeypatch, caplog, error):
    def broken(*args, **kwargs):
        raise error("the sampler broke")

    monkeypatch.setattr(server.sampler, "greedy", broken)
    body = {"prompt": [1, 2], "max_tokens": 2, "temperature": 0}
    with caplog.at_level(logging.ERROR, logger="trainspec.model_server"):
        answer = httpx.post(url(server, "/v1/completions"), json=body, timeout=CLIENT_S)
    assert answer.status_code == 500
    message = answer.json()["error"]["message"]
    assert f"{error.__name__}: the sampler broke" in message and "Traceback" not in answer.text
    (record,) = [r for r in caplog.records if r.name == "trainspec.model_server"]
    assert record.exc_info is not None and record.exc_info[0] is error
    monkeypatch.undo()
    assert (
        httpx.post(url(server, "/v1/completions"), json=body, timeout=CLIENT_S).status_code == 200
    )


def test_update_weights_loads_under_its_root_only(server, root, model_dir, tmp_path):
    shutil.copytree(model_dir, root / "step_1")
    (root / "step_2").symlink_to(model_dir, target_is_directory=True)  # a link out of the root
    reload = url(server, "/update_weights")
    ok = httpx.post(reload, json={"path": str(root / "step_1")}, timeout=CLIENT_S)
    assert ok.status_code == 200, ok.text
    for path in (model_dir, root / "step_2", root / ".." / model_dir.name, tmp_path):
        refused = httpx.post(reload, json={"path": str(path)}, timeout=CLIENT_S)
        assert refused.status_code == 403, path
        message = refused.json()["error"]["message"]
        assert f"is outside {root.resolve()}" in message and "--weights-root" in message
    missing = httpx.post(reload, json={"path": str(root / "step_9")}, timeout=CLIENT_S)
    assert missing.status_code == 404


def test_a_server_without_a_weights_root_loads_nothing(server, model_dir):
    bare = ModelServer(server.sampler, "tiny").start()  # as an environment serves its policy
    try:
        answer = httpx.post(
            f"http://127.0.0.1:{bare.port}/update_weights",
            json={"path": str(model_dir)},
            timeout=CLIENT_S,
        )
    finally:
        bare.close()
    assert answer.status_code == 403
    assert "without a weights root" in answer.json()["error"]["message"]


def test_the_token_route_refuses_a_bad_content_length_too():
    route = TokenRoute("http://127.0.0.1:9/v1").start()  # nothing is passed on
    try:
        port = int(route.base_url.split(":")[2].split("/")[0])
        assert raw(port, post_head("-1"))[0] == 400
        assert raw(port, post_head(str(10**12)))[0] == 413
    finally:
        route.close()
