"""A sampler backed by any OpenAI-compatible completions server (vLLM, ...), over HTTP.

    sampler = OpenAISampler("http://127.0.0.1:8000/v1", "my-model", tokenizer, stop_id)

One `POST {base_url}/completions` carries every prompt as token ids with `n`, the temperature and
the seed; vLLM answers prompt-major (choice index = prompt index · n + sample index), token ids
as "token_id:123" (`return_tokens_as_token_ids`) with log-probabilities at the temperature
(`--logprobs-mode processed_logprobs`). Top-k, top-p, min-p and the repetition penalty go
neutral, whatever a generation_config.json says. `score` reads the unscaled `prompt_logprobs`.

New weights: with `reload_path` (e.g. "/update_weights") `load_weights` POSTs
{"path": <weights dir>} to the server root + reload_path and waits for the answer; a
reload_path ending in "/collective_rpc" (vLLM in dev mode, as `rl` and `sft` start it) reloads
through vLLM's own routes instead, paused, with the served weight version checked
(vllm_reload.py). Without reload_path `load_weights` does nothing and the server is expected to
pick up new weights itself.

With an adaptive [orchestrator.concurrency] (inflight.py) every prompt is a request of its
own, sent when the cap admits its n completions, so the number in flight follows the server's
KV-cache usage; otherwise a request carries up to max_inflight completions.

A server unreachable after a few retries with backoff, an HTTP error or an unreadable answer is
a SetupError on `orchestrator.sampler.base_url`; a refused reload one on `sampler.reload_path`.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...errors import SetupError
from .inflight import InflightLimit
from .sampler import Completion, truncate_at_stop, unscaled_scores
from .vllm_reload import RPC_PATH, reload_weights

FIELD = "sampler.base_url"
RELOAD_FIELD = "sampler.reload_path"
START_FIX = (
    "start the server (e.g. `vllm serve <model> --logprobs-mode processed_logprobs`) "
    "or check the URL"
)
RETRY_STATUS = (502, 503, 504)  # a proxy or a server still starting up
TOKEN_PREFIX = "token_id:"
MAX_THREADS = 1024  # requests waiting on an adaptive cap, each on a thread of its own


class OpenAISampler:
    """Completions from an OpenAI-compatible server at `base_url` (e.g. "http://host:8000/v1")."""

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer,
        stop_id: int,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        *,
        reload_path: str | None = None,
        reload_field: str = "path",
        retries: int = 3,
        backoff_s: float = 0.5,
        extra_body: dict[str, Any] | None = None,
        max_batch: int | None = None,
        headers: dict[str, str] | None = None,
        field: str = FIELD,
        inflight: InflightLimit | None = None,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.stop_id = stop_id
        self.reload_path = reload_path
        self.reload_field = reload_field
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})  # train requests only; merged last
        self.max_batch = max_batch  # completions per request (episodes in flight)
        self.field = field  # the setting a connection error names
        headers = {**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self.headers = headers  # what an environment's client sends too (verifiers_env.py)
        self.inflight = inflight  # an adaptive cap: one request per prompt, as it allows
        # as many connections as requests in flight (httpx would queue past 100 by default)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        self._client = httpx.Client(timeout=timeout_s, headers=headers, limits=limits)

    def sample(
        self, prompts: list[list[int]], n: int, *, temperature: float, max_tokens: int, seed: int
    ) -> list[list[Completion]]:
        """`n` completions per prompt; note that vLLM seeds every prompt of a request alike, so
        two equal prompts in one call get the same completions."""
        if not prompts:
            return []
        if self.inflight is not None and self.inflight.adaptive:
            return self._sample_gated(prompts, n, temperature, max_tokens, seed)
        per_call = max(1, (self.max_batch or len(prompts) * n) // n)
        groups: list[list[Completion]] = []
        for start in range(0, len(prompts), per_call):
            chunk = prompts[start : start + per_call]
            body = {**self._body(chunk, n, temperature, max_tokens), **self.extra_body}
            body["seed"] = seed + start
            rows = self._complete(body, len(chunk) * n)
            groups += [rows[i * n : (i + 1) * n] for i in range(len(chunk))]
        return groups

    def _sample_gated(
        self, prompts: list[list[int]], n: int, temperature: float, max_tokens: int, seed: int
    ) -> list[list[Completion]]:
        """One request per prompt (the seed of a one-prompt chunk), sent as the adaptive cap
        admits its n completions; the cap moves as they finish (inflight.py)."""
        assert self.inflight is not None
        gate = self.inflight.gate

        def one(index: int) -> list[Completion]:
            body = {**self._body([prompts[index]], n, temperature, max_tokens), **self.extra_body}
            body["seed"] = seed + index
            with gate.hold(n):
                return self._complete(body, n)

        ceiling = self.inflight.fixed or len(prompts) * n
        workers = max(1, min(len(prompts), MAX_THREADS, ceiling // n))
        with ThreadPoolExecutor(workers, thread_name_prefix="sample") as pool:
            return list(pool.map(one, range(len(prompts))))

    def greedy(self, prompts: list[list[int]], *, max_tokens: int) -> list[Completion]:
        if not prompts:
            return []
        return self._complete(self._body(prompts, 1, 0.0, max_tokens), len(prompts))

    def score(
        self, prompts: list[list[int]], completions: list[list[int]], *, temperature: float
    ) -> list[list[float]]:
        """Each completion's log-probabilities after its prompt, read from vLLM's
        `prompt_logprobs` of prompt + completion (one generated token, thrown away): of the
        unscaled distribution whatever the request's temperature, so at temperature 1 only."""
        if temperature != 1.0:
            raise SetupError(self.field, *unscaled_scores(temperature))
        if len(prompts) != len(completions):
            raise ValueError(f"{len(prompts)} prompts but {len(completions)} completions")
        rows = [list(p) + list(c) for p, c in zip(prompts, completions, strict=True)]
        if not rows:
            return []
        per_call = self.max_batch or len(rows)
        out: list[list[float]] = []
        for start in range(0, len(rows), per_call):
            chunk = rows[start : start + per_call]
            body = {**self._body(chunk, 1, temperature, 1), "prompt_logprobs": 0, "logprobs": None}
            answer = self.post(f"{self.base_url}/completions", body)
            try:
                choices = sorted(answer["choices"], key=lambda choice: int(choice["index"]))
                if len(choices) != len(chunk):
                    raise ValueError(f"expected {len(chunk)} choices, got {len(choices)}")
                for offset, choice in enumerate(choices):
                    index = start + offset
                    out.append(
                        _prompt_logprobs(
                            choice["prompt_logprobs"], rows[index], len(prompts[index])
                        )
                    )
            except (KeyError, TypeError, ValueError) as exc:
                raise SetupError(
                    self.field,
                    f"the prompt_logprobs answer of {self.base_url} cannot be read ({exc!r})",
                    "use a vLLM-compatible server that takes prompt_logprobs",
                ) from None
        return out

    def load_weights(self, weights_dir: Path) -> None:
        """Ask the server to load `weights_dir` (with `reload_path`), else nothing: the server
        is then expected to watch the weights directory itself."""
        if self.reload_path is None:
            return
        if self.reload_path.rstrip("/").endswith(RPC_PATH):  # vLLM's own reload
            reload_weights(self, self._reload_url().rstrip("/").removesuffix(RPC_PATH), weights_dir)
            return
        self.post(self._reload_url(), {self.reload_field: str(weights_dir)}, reload=True)

    def close(self) -> None:
        self._client.close()

    def _body(
        self, prompts: list[list[int]], n: int, temperature: float, max_tokens: int
    ) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt": [list(p) for p in prompts],
            "n": n,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "top_p": 1.0,
            "top_k": -1,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "logprobs": 1,
            "stop_token_ids": [self.stop_id],
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }

    def _reload_url(self) -> str:
        assert self.reload_path is not None
        if self.reload_path.startswith(("http://", "https://")):
            return self.reload_path
        root = self.base_url.removesuffix("/v1")
        return f"{root}/{self.reload_path.lstrip('/')}"

    def _complete(self, body: dict[str, Any], expected: int) -> list[Completion]:
        answer = self.post(f"{self.base_url}/completions", body)
        try:
            choices = sorted(answer["choices"], key=lambda choice: int(choice["index"]))
            if [int(c["index"]) for c in choices] != list(range(expected)):
                raise ValueError(f"expected choices 0..{expected - 1}, got {len(choices)}")
            return [self._completion(choice) for choice in choices]
        except (KeyError, TypeError, ValueError) as exc:
            raise SetupError(
                self.field,
                f"the completions answer of {self.base_url} cannot be read ({exc!r})",
                "use a vLLM-compatible server: token-id prompts, logprobs and "
                "return_tokens_as_token_ids",
            ) from None

    def _completion(self, choice: dict[str, Any]) -> Completion:
        logprobs = choice["logprobs"]
        ids = choice.get("token_ids") or [_token_id(token) for token in logprobs["tokens"]]
        values = [float(value) for value in logprobs["token_logprobs"]]
        if len(values) != len(ids):
            raise ValueError(f"{len(ids)} tokens but {len(values)} log-probabilities")
        kept, stopped = truncate_at_stop([int(i) for i in ids], self.stop_id)
        return Completion(
            token_ids=kept,
            logprobs=values[: len(kept)],
            text=self.tokenizer.decode(kept, skip_special_tokens=True),
            finished=stopped or choice.get("finish_reason") == "stop",
        )

    def post(self, url: str, body: dict[str, Any], *, reload: bool = False) -> dict[str, Any]:
        """POST JSON, retrying connection failures (a refused or reset connection) and
        502/503/504 with exponential backoff.
        An HTTP error answer to a reload is reported on `reload_path`."""
        import httpx

        error = SetupError(self.field, f"no request was sent to {url}", START_FIX)
        for attempt in range(self.retries + 1):
            try:
                response = self._client.post(url, json=body)
            except (httpx.NetworkError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                reason = str(exc) or type(exc).__name__
                error = SetupError(self.field, f"cannot reach {url}: {reason}", START_FIX)
            except httpx.TimeoutException:
                raise SetupError(
                    self.field,
                    f"{url} did not answer within {self.timeout_s:g} s",
                    "raise the sampler timeout, or check that the server is not stuck",
                ) from None
            except httpx.HTTPError as exc:
                raise SetupError(
                    self.field, f"request to {url} failed: {exc!r}", START_FIX
                ) from None
            else:
                if response.status_code not in RETRY_STATUS:
                    return self._json(url, response, reload)
                error = self._status_error(url, response, reload)
            if attempt < self.retries:
                time.sleep(self.backoff_s * 2**attempt)
        raise error

    def get(self, url: str) -> dict[str, Any]:
        """GET a JSON object; failures as `post` reports them (no retry)."""
        import httpx

        try:
            return self._json(url, self._client.get(url), False)
        except httpx.HTTPError as exc:
            raise SetupError(self.field, f"cannot reach {url}: {exc!r}", START_FIX) from None

    def _json(self, url: str, response, reload: bool) -> dict[str, Any]:
        if response.is_error:
            raise self._status_error(url, response, reload)
        if reload:
            return {}  # any success answer will do
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise SetupError(
                self.field,
                f"{url} answered something that is not a JSON object: {response.text[:200]!r}",
                "check that the URL is an OpenAI-compatible server's /v1 root",
            )
        return answer

    def _status_error(self, url: str, response, reload: bool = False) -> SetupError:
        problem = f"{url} answered HTTP {response.status_code}: {response.text[:300].strip()!r}"
        if reload and response.status_code in (404, 405):
            fix = f'name the path where the server takes POST {{"{self.reload_field}": <dir>}}'
            return SetupError(RELOAD_FIELD, problem, fix)
        if reload and response.status_code not in RETRY_STATUS:
            fix = "see the server's log for why it could not load the weights"
            return SetupError(RELOAD_FIELD, problem, fix)
        fix = {
            400: "check the model name and that the server takes vLLM's completion options",
            404: "check the URL (it ends in /v1) and the model name the server serves",
            401: "give the server's API key",
            403: "give the server's API key",
        }.get(response.status_code, START_FIX)
        return SetupError(self.field, problem, fix)


def _prompt_logprobs(entries: list, ids: list[int], prompt_len: int) -> list[float]:
    """The log-probability of each id after `prompt_len` from vLLM's prompt_logprobs: one entry
    per prompt position (None first), each a dict keyed by token id."""
    if len(entries) != len(ids):
        raise ValueError(f"{len(entries)} prompt_logprobs entries for {len(ids)} tokens")
    out = []
    for position in range(prompt_len, len(ids)):
        entry = entries[position][str(ids[position])]
        out.append(float(entry["logprob"] if isinstance(entry, dict) else entry))
    return out


def _token_id(token: str) -> int:
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        raise ValueError(f"token {token!r} is not a {TOKEN_PREFIX}<id> string")
    return int(token[len(TOKEN_PREFIX) :])
