"""A small OpenAI-compatible server for a local model: the frozen teacher of opd, the frozen
sampler of sft distillation, or any endpoint a run needs when no vLLM is at hand (CPU).

    python -m trainspec.trainers.orchestrator.sampling.model_server outputs/demo-sft/weights \
        --name teacher --port 8001

It speaks the part of vLLM's API the orchestrator uses, with the same shapes:

* `GET /health`, `GET /v1/models`;
* `POST /v1/completions` with token-id (or text) prompts, `n`, `temperature` (0 = greedy),
  `max_tokens`, `seed`, `stop_token_ids`, `logprobs`, `return_tokens_as_token_ids` and
  `prompt_logprobs` (each prompt token's log-probability under the unscaled distribution,
  as vLLM computes them whatever the request's temperature: what distillation scores with);
* `POST /inference/v1/generate` (vLLM's token-in, token-out route, what the `renderers`
  package's client and verifiers' train client call): `token_ids` and `sampling_params`
  (temperature, max_tokens, n, seed, stop_token_ids, logprobs), answered with each choice's
  `token_ids`, `finish_reason` and `logprobs.content` ("token_id:N" entries);
* `POST /update_weights` with `{"path": <weights dir>}`: new weights loaded in place, the
  route a sampler pointed at this server names as its `reload_path` (vLLM's own reload routes,
  which `rl` and `sft` use on the vLLM server they start, are not imitated here).

Sampling is the plain distribution at the temperature: a request that asks for top-k, top-p,
min-p or a repetition penalty is answered 400 rather than sampled differently. Generation runs
one request at a time (transformers' `generate` in this process, LocalSampler). The HTTP side
is http_server.py; what a request may ask, request_fields.py.

A bad client cannot hold or crash it: each connection has a socket timeout; a body over the
cap is a 413; `n`, `max_tokens`, prompts per request and tokens per prompt are capped (400
naming the field and the cap, `Limits`); token ids must lie in the model's vocabulary (400);
anything unexpected is a JSON 500, its traceback in this process's log.

`/update_weights` loads only directories under the weights root (symlinks and `..` resolved
first; anything else: 403), which `--weights-root` names: a run's `broadcasts/` directory.
Without it the server reloads nothing (403 naming the flag), as a teacher never needs to. A
ModelServer built in code has the root it is given (None: none).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import threading
from pathlib import Path
from typing import Any

from ...errors import SetupError
from .http_server import HttpServer, JsonHandler, RequestError
from .request_fields import (
    Limits,
    cap,
    check_ids,
    number_field,
    prompt_ids,
    vocab_size,
    weights_path,
)  # fmt: skip

NEUTRAL = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
# What /inference/v1/generate's sampling_params may hold besides NEUTRAL's keys.
GENERATE_PARAMS = {
    "temperature", "max_tokens", "n", "seed", "stop_token_ids", "logprobs",
    "skip_special_tokens",
}  # fmt: skip


class ModelServer:
    """Serves `sampler` (a LocalSampler) under `name` at http://host:port/v1 (port 0: a free
    one, read back from `port`); `/update_weights` loads directories under `weights_root` only
    (None: none), and every request stays within `limits`."""

    def __init__(
        self,
        sampler,
        name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        weights_root: Path | None = None,
        limits: Limits = Limits(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        self.sampler = sampler
        self.name = name
        self.weights_root = Path(weights_root).resolve() if weights_root is not None else None
        self.limits = limits
        model = getattr(sampler, "model", None)
        config = getattr(model, "config", None)
        self.max_model_len = getattr(config, "max_position_embeddings", None)
        self.vocab = vocab_size(model, getattr(sampler, "tokenizer", None))
        self._lock = threading.Lock()  # one generate at a time: the model is not re-entrant
        self._seeds = itertools.count(1)
        server = self

        class Handler(JsonHandler):
            timeout = limits.timeout_s
            max_body_bytes = limits.max_body_bytes

            def do_GET(self) -> None:
                self.answer(lambda: server.get(self.path))

            def do_POST(self) -> None:
                self.answer(lambda: server.post(self.path, self.read_json))

        self.httpd = HttpServer((host, port), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://{host}:{self.port}/v1"

    def get(self, path: str) -> dict[str, Any]:
        if path == "/health":
            return {}
        if path == "/v1/models":
            model = {"id": self.name, "object": "model", "owned_by": "trainspec"}
            if self.max_model_len is not None:
                model["max_model_len"] = self.max_model_len
            return {"object": "list", "data": [model]}
        raise RequestError(404, f"no route GET {path}")

    def post(self, path: str, read_json) -> dict[str, Any]:
        routes = {"/v1/completions": self.complete, "/inference/v1/generate": self.generate,
                  "/update_weights": self.update_weights}  # fmt: skip
        if path not in routes:
            raise RequestError(404, f"no route POST {path}")
        return routes[path](read_json())

    def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("model", self.name) != self.name:
            raise RequestError(
                404, f"model {body.get('model')!r} is not served; this is {self.name!r}"
            )
        for key, neutral in NEUTRAL.items():
            if body.get(key, neutral) not in (neutral, None):
                raise RequestError(
                    400, f"{key} = {body[key]!r}: this server samples the plain distribution only"
                )
        limits = self.limits
        prompts = prompt_ids(body, self.sampler.tokenizer, limits, self.vocab, self.max_model_len)
        n = number_field(body, "n", 1, int)
        temperature = number_field(body, "temperature", 1.0)
        max_tokens = number_field(body, "max_tokens", 16, int)
        seed = number_field(body, "seed", None, int)
        if seed is None:  # as vLLM: unseeded requests differ (each takes the next seed)
            seed = next(self._seeds)
        if n < 1 or max_tokens < 1 or temperature < 0:
            raise RequestError(400, "n and max_tokens must be >= 1 and temperature >= 0")
        cap(f"n = {n}", n, limits.max_n, "completions per prompt")
        cap(f"max_tokens = {max_tokens}", max_tokens, limits.max_tokens, "tokens")
        if not 0 <= seed < 2**63:
            raise RequestError(400, f"seed = {seed} must lie in 0 .. 2**63 - 1")
        stops = body.get("stop_token_ids") or [self.sampler.stop_id]
        if not isinstance(stops, list) or not all(type(t) is int for t in stops):
            raise RequestError(400, f"stop_token_ids must be a list of token ids, got {stops!r}")
        check_ids(stops, self.vocab, "stop_token_ids")
        as_ids = bool(body.get("return_tokens_as_token_ids"))
        with self._lock:
            saved, self.sampler.stop_id = self.sampler.stop_id, int(stops[0])
            try:
                if temperature == 0:
                    groups = [[c] for c in self.sampler.greedy(prompts, max_tokens=max_tokens)]
                    groups = [group * n for group in groups]
                else:
                    groups = self.sampler.sample(
                        prompts, n, temperature=temperature, max_tokens=max_tokens, seed=seed
                    )
                scored = None
                if body.get("prompt_logprobs") is not None:
                    scored = self.sampler.score(
                        [p[:1] for p in prompts], [p[1:] for p in prompts],
                        temperature=1.0,  # as vLLM: unscaled, whatever the temperature
                    )  # fmt: skip
            finally:
                self.sampler.stop_id = saved
        choices = []
        for index, group in enumerate(groups):
            for j, completion in enumerate(group):
                choice: dict[str, Any] = {
                    "index": index * n + j,
                    "text": completion.text,
                    "token_ids": completion.token_ids,
                    "finish_reason": "stop" if completion.finished else "length",
                }
                if body.get("logprobs") is not None:
                    tokens = [
                        f"token_id:{t}" if as_ids else self.sampler.tokenizer.decode([t])
                        for t in completion.token_ids
                    ]
                    choice["logprobs"] = {"tokens": tokens, "token_logprobs": completion.logprobs}
                if scored is not None:
                    ids = prompts[index]
                    entries = [
                        {str(t): {"logprob": v}}
                        for t, v in zip(ids[1:], scored[index], strict=True)
                    ]
                    choice["prompt_logprobs"] = [None, *entries]
                choices.append(choice)
        return {"object": "text_completion", "model": self.name, "choices": choices}

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        """vLLM's /inference/v1/generate, through `complete`: one prompt of token ids."""
        params = body.get("sampling_params") or {}
        if not isinstance(params, dict):
            raise RequestError(400, "sampling_params must be an object")
        unknown = sorted(set(params) - GENERATE_PARAMS - set(NEUTRAL))
        if unknown:
            raise RequestError(
                400, f"sampling_params {', '.join(unknown)}: not honoured by this server"
            )
        request = {
            **{k: v for k, v in params.items() if k != "logprobs"},
            "model": body.get("model", self.name),
            "prompt": body.get("token_ids"),
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
        }
        answer = self.complete(request)
        choices = [
            {
                "index": choice["index"],
                "token_ids": choice["token_ids"],
                "finish_reason": choice["finish_reason"],
                "logprobs": {
                    "content": [
                        {"token": token, "logprob": logprob}
                        for token, logprob in zip(
                            choice["logprobs"]["tokens"],
                            choice["logprobs"]["token_logprobs"],
                            strict=True,
                        )
                    ]
                },
            }
            for choice in answer["choices"]
        ]
        return {"request_id": "", "prompt_token_ids": body.get("token_ids"), "choices": choices}

    def update_weights(self, body: dict[str, Any]) -> dict[str, Any]:
        """Load the weights directory `path`, when it lies under the weights root."""
        weights = weights_path(body, self.weights_root)
        with self._lock:
            self.sampler.load_weights(weights)
        return {"status": "ok", "path": body["path"]}

    def start(self) -> ModelServer:
        """Serve in a background thread (tests, or a server inside another process)."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def load(model: str, device: str = "auto", max_batch: int | None = None):
    """A LocalSampler of the model at `model` (a weights directory or a cached hub id)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ...chat.prompts import template_stop_id
    from .local_sampler import LocalSampler

    try:
        tokenizer = AutoTokenizer.from_pretrained(model)
        lm = AutoModelForCausalLM.from_pretrained(model, dtype="auto")
    except (OSError, ValueError) as exc:  # not there, not a model, or an invalid hub id
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SetupError(
            "model", f"{model!r} cannot be loaded: {reason}", "name a weights directory (HF layout)"
        ) from None
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    lm.to(device).eval()  # type: ignore[arg-type]  # typeshed's wraps() loses `self`
    return LocalSampler(
        lm, tokenizer, template_stop_id(tokenizer), torch.device(device), max_batch=max_batch
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainspec.trainers.orchestrator.sampling.model_server",
        description="Serve a local model over vLLM's completions API (frozen teachers on CPU).",
    )
    parser.add_argument("model", help="weights directory (Hugging Face layout)")
    parser.add_argument("--name", help="model name clients send (default: the model argument)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    parser.add_argument(
        "--weights-root",
        help="the only directory /update_weights loads from, subdirectories included: a run's "
        "broadcasts/ directory (default: none, no reloads)",
    )
    args = parser.parse_args(argv)
    try:
        sampler = load(args.model, args.device)
        root = Path(args.weights_root).resolve() if args.weights_root is not None else None
        server = ModelServer(
            sampler, args.name or args.model, args.host, args.port, weights_root=root
        )
    except SetupError as err:
        print(err.render(), file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: --port {args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"serving {server.name!r} at {server.base_url}", flush=True)
    reloads = f"under {root}" if root is not None else "nowhere (no --weights-root)"
    print(f"/update_weights loads weights {reloads}", flush=True)
    try:
        server.httpd.serve_forever(0.05)
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
