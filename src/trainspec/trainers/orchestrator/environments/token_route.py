"""What verifiers' train client reads from vLLM's token route, in front of a server sampler.

verifiers plays each turn through the `renderers` package's client, which POSTs the rendered
prompt to `/inference/v1/generate` and reads every sampled token's log-prob entry as
`{"token": "token_id:N", "logprob": ...}`. vLLM 0.32 (and 0.34, the newest checked) answers
that route's default `output_mode = "tokens"` with `{"token_id": N, "logprob": ...}`, and
renderers 0.1.12, the newest release, refuses every such answer ("choice.logprobs.content[0]
.token must be 'token_id:N'"): no episode would play on a real engine.

    route = TokenRoute(sampler.base_url, sampler.headers).start()
    route.base_url      # http://127.0.0.1:<port>/v1: what verifiers' client is pointed at
    route.close()

TokenRoute is a loopback server that passes every request to the server sampler's endpoint
as it came (its body and headers: Authorization, verifiers' session id) and its answer back; in a
token-route answer each log-prob entry that names its token only by `token_id` gets the
`token` renderers reads, the other fields untouched (`renderers_shape`). An answer already in
renderers' shape, such as trainspec's own model server's, passes unchanged. Nothing else is
rewritten: the tokens, log-probs, finish reasons and weight versions are vLLM's.
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..sampling.http_server import HttpServer, JsonHandler, RequestError

GENERATE_PATH = "/inference/v1/generate"
HOP_HEADERS = {"host", "content-length", "connection", "keep-alive", "transfer-encoding",
               "accept-encoding"}  # fmt: skip
UPSTREAM_TIMEOUT = httpx.Timeout(connect=30.0, read=900.0, write=60.0, pool=60.0)


def renderers_shape(answer: dict[str, Any]) -> dict[str, Any]:
    """`answer` (a token-route response body) with each sampled token's log-prob entry
    naming its token as "token_id:N", the shape renderers' client reads."""
    if not isinstance(answer, dict):
        raise ValueError("not a JSON object")
    for choice in answer.get("choices") or []:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        for entry in (logprobs or {}).get("content") or []:
            if isinstance(entry, dict) and "token" not in entry and "token_id" in entry:
                entry["token"] = f"token_id:{entry['token_id']}"
    return answer


class TokenRoute:
    """A loopback server in front of `base_url` (an OpenAI-compatible server's `/v1`) that
    answers the token route in renderers' shape; `headers` go with every request it passes on
    unless the request carries its own."""

    def __init__(self, base_url: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        self.upstream = f"{parts.scheme}://{parts.netloc}"
        self._client = httpx.Client(timeout=UPSTREAM_TIMEOUT, headers=headers or {})
        route = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                route.forward(self, None)

            def do_POST(self) -> None:  # noqa: N802
                try:  # a Content-Length that is no byte count, or over the cap: 400, 413
                    body = self.read_body()
                except RequestError as exc:
                    self.send_json(exc.status, {"error": {"message": str(exc)}})
                    return
                route.forward(self, body)

        self._httpd = HttpServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.1,), daemon=True)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> TokenRoute:
        self._thread.start()
        return self

    def forward(self, handler: JsonHandler, body: bytes | None) -> None:
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in HOP_HEADERS}
        try:
            answer = self._client.request(
                "GET" if body is None else "POST", self.upstream + handler.path,
                content=body, headers=headers,
            )  # fmt: skip
        except httpx.HTTPError as exc:
            handler.send_json(502, {"error": {"message": f"{self.upstream}: {exc!r}"}})
            return
        content = answer.content
        if handler.path.split("?")[0] == GENERATE_PATH and answer.is_success:
            with contextlib.suppress(ValueError):  # not one JSON object (a stream): as it came
                content = json.dumps(renderers_shape(json.loads(content))).encode()
        handler.send_response(answer.status_code)
        handler.send_header("Content-Type", answer.headers.get("content-type", "application/json"))
        handler.send_header("Content-Length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._client.close()
        self._thread.join(timeout=10)
