"""Fixtures of the orchestrator tests: the built-in tiny model's tokenizer, and random-weight
copies of that model saved as weights directories (for servers to load)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tokenizer():
    from trainspec.config import load
    from trainspec.trainers.core.tokenizer import build_tokenizer

    config = load("sft", [], {"model.name": "builtin:tiny-qwen3"}).config
    return build_tokenizer(config.tokenizer, config.model)


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory, tokenizer) -> Callable[[int], Path]:
    """`make(seed)`: a directory holding the built-in model with weights drawn from `seed`,
    its config and its tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainspec.trainers.builtin import builtin_model_dir

    def make(seed: int) -> Path:
        torch.manual_seed(seed)
        out = tmp_path_factory.mktemp(f"tiny-seed-{seed}")
        config = AutoConfig.from_pretrained(builtin_model_dir("builtin:tiny-qwen3"))
        AutoModelForCausalLM.from_config(config).save_pretrained(out)
        tokenizer.save_pretrained(out)
        return out

    return make


@pytest.fixture
def canned_server():
    """`serve(answer)`: a server in a thread that answers every GET and POST with the JSON
    `answer` (a dict) and records each request's headers; returns (base URL, headers list).
    Closed when the test ends."""
    import json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    servers = []

    def serve(answer: dict) -> tuple[str, list[dict]]:
        seen: list[dict] = []
        data = json.dumps(answer).encode()

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                seen.append(dict(self.headers))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer  # noqa: N815 (http.server's names)

            def log_message(self, *args) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen

    yield serve
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()
