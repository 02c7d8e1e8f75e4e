"""The HTTP side of the local model server (model_server.py): a threading server sized for a
sampler's burst, a handler that answers JSON, and the errors and fields of a request's body.

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            try:
                body = self.read_json()   # RequestError(400) unless a JSON object
                self.send_json(200, {"n": number_field(body, "n", 1, int)})
            except RequestError as exc:
                self.send_json(exc.status, {"error": {"message": str(exc)}})

    httpd = HttpServer(("127.0.0.1", 0), Handler)   # port 0: a free one, httpd.server_address[1]
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HttpServer(ThreadingHTTPServer):
    """http.server's threading server with a listen backlog for a sampler's burst: the
    orchestrator sends one request per prompt at once (up to its in-flight cap), and the
    standard backlog of 5 has the kernel reset the connections that overflow it."""

    request_queue_size = 1024
    daemon_threads = True


class RequestError(Exception):
    """A request answered with `status` and {"error": {"message": ...}}."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler whose bodies are JSON objects, both ways, and that logs nothing (the
    orchestrator logs what matters)."""

    def read_json(self) -> dict[str, Any]:
        """The request's body (none: {}); json.JSONDecodeError when it is not JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        return body

    def send_json(self, status: int, answer: dict) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # quiet: the orchestrator logs what matters
        pass


def prompt_ids(body: dict[str, Any], tokenizer) -> list[list[int]]:
    """The body's `prompt` as lists of token ids: a string, token ids, or a list of either
    (strings tokenized without special tokens)."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompt = [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompt = [prompt]
    if not isinstance(prompt, list) or not prompt:
        raise RequestError(400, "prompt must be a string, token ids, or a list of either")
    out = []
    for item in prompt:
        if isinstance(item, str):
            item = tokenizer(item, add_special_tokens=False)["input_ids"]
        if not isinstance(item, list) or not item or not all(isinstance(t, int) for t in item):
            raise RequestError(400, f"prompt {item!r} is not a non-empty list of token ids")
        out.append(item)
    return out


def number_field(body: dict[str, Any], key: str, default, kind=float):
    """The body's `key` as `kind` (`default` when absent or null); a RequestError(400) when it
    is not a number."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(400, f"{key} must be a number, got {value!r}")
    return kind(value)
