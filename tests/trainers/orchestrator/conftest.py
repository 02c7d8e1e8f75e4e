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
    from http.server import BaseHTTPRequestHandler
    from threading import Thread

    from trainspec.trainers.orchestrator.sampling.http_server import HttpServer

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

        httpd = HttpServer(("127.0.0.1", 0), Handler)
        Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen

    yield serve
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def scripted_weights(tmp_path_factory, tokenizer) -> Path:
    """A real Qwen3 checkpoint whose weights make it answer "x" and stop, every turn: its
    layers add nothing to the residual stream, so the next token depends on the current one
    alone; after "\\n" (the end of the reply header) it writes "x", after "x" the stop token.
    Episodes through it are exact: known tokens, known rewards, prefix-true histories."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainspec.trainers.builtin import builtin_model_dir
    from trainspec.trainers.chat.prompts import template_stop_id

    config = AutoConfig.from_pretrained(builtin_model_dir("builtin:tiny-qwen3"))
    config.tie_word_embeddings = False
    model = AutoModelForCausalLM.from_config(config)
    newline, x, stop = (
        tokenizer.encode("\n")[-1],
        tokenizer.encode("x")[-1],
        template_stop_id(tokenizer),
    )
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = model.model.embed_tokens.weight
        embed.zero_()
        embed[:, 2] = 1.0  # every token: direction 2, which no row of the head reads
        embed[newline, 2], embed[newline, 0] = 0.0, 1.0
        embed[x, 2], embed[x, 1] = 0.0, 1.0
        head = model.lm_head.weight
        head.zero_()
        head[x, 0] = 10.0
        head[stop, 1] = 10.0
    out = tmp_path_factory.mktemp("scripted")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def policy(scripted_weights):
    """The scripted checkpoint, loaded as the in-process sampler's policy."""
    from trainspec.trainers.orchestrator.sampling.model_server import load

    return load(str(scripted_weights), device="cpu")


@pytest.fixture(scope="module")
def player(tokenizer):
    """An EnvPlayer (verifiers episodes), closed after the module's tests."""
    from trainspec.trainers.orchestrator.environments.verifiers_env import EnvPlayer

    player = EnvPlayer(tokenizer, None, max_inflight=None)
    yield player
    player.close()
