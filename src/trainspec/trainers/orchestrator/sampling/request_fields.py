"""What a request to the local model server (model_server.py) may ask: the `Limits` of one
request, and its fields read and checked against them and the model.

    prompts = prompt_ids(body, tokenizer, limits, vocab, max_len)  # or RequestError(400)
    n = number_field(body, "n", 1, int)
    cap(f"n = {n}", n, limits.max_n, "completions per prompt")
    weights = weights_path(body, root)                             # or RequestError(403)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .http_server import JsonHandler, RequestError


@dataclass(frozen=True)
class Limits:
    """What one request may ask of a local model server: well above what a run asks of one,
    far below what would hold it for hours. A request past a cap is answered 400 naming the
    field and the cap (a body past its cap: 413)."""

    timeout_s: float = JsonHandler.timeout  # a client silent this long is dropped
    max_body_bytes: int = JsonHandler.max_body_bytes
    max_prompts: int = 1024  # prompts in one request
    max_prompt_tokens: int = 32768  # tokens in one prompt (also at most the model's length)
    max_n: int = 128  # completions per prompt
    max_tokens: int = 32768  # tokens per completion


def prompt_ids(
    body: dict[str, Any], tokenizer, limits: Limits, vocab: int | None, max_len: int | None
) -> list[list[int]]:
    """The body's `prompt` as lists of token ids: a string, token ids, or a list of either
    (strings tokenized without special tokens); at most `limits.max_prompts` of them, each of at
    most `limits.max_prompt_tokens` (and `max_len`, the model's) ids below `vocab`."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompt = [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompt = [prompt]
    if not isinstance(prompt, list) or not prompt:
        raise RequestError(400, "prompt must be a string, token ids, or a list of either")
    cap(f"prompt: {len(prompt)} prompts", len(prompt), limits.max_prompts, "prompts per request")
    longest = min(limits.max_prompt_tokens, max_len or limits.max_prompt_tokens)
    out = []
    for index, item in enumerate(prompt):
        if isinstance(item, str):
            item = tokenizer(item, add_special_tokens=False)["input_ids"]
        if not isinstance(item, list) or not item or not all(type(t) is int for t in item):
            shown = repr(item) if len(repr(item)) <= 80 else repr(item)[:77] + "..."
            raise RequestError(400, f"prompt {shown} is not a non-empty list of token ids")
        cap(f"prompt {index}: {len(item)} tokens", len(item), longest, "tokens per prompt")
        check_ids(item, vocab, f"prompt {index}")
        out.append(item)
    return out


def check_ids(ids: list[int], vocab: int | None, where: str) -> None:
    """A RequestError(400) for a token id outside 0 .. vocab - 1 (`vocab` None: not checked)."""
    if vocab is None:
        return
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise RequestError(
            400, f"{where}: token id {bad[0]} is outside the vocabulary (0 to {vocab - 1})"
        )


def cap(what: str, value: int, most: int, unit: str) -> None:
    if value > most:
        raise RequestError(400, f"{what} is over this server's cap of {most} {unit}")


def number_field(body: dict[str, Any], key: str, default, kind=float):
    """The body's `key` as `kind` (`default` when absent or null); a RequestError(400) when it
    is not a finite number."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RequestError(400, f"{key} must be a number, got {value!r}")
    return kind(value)


def weights_path(body: dict[str, Any], root: Path | None) -> Path:
    """The body's `path`, resolved (symlinks and `..`: neither leads out), when it is a
    directory under `root`; a RequestError otherwise (403: no root, or outside it)."""
    path = body.get("path")
    if not isinstance(path, str) or not path:
        raise RequestError(400, 'send {"path": <weights dir>}')
    if root is None:
        raise RequestError(
            403, "this server loads no weights over HTTP: it was started without a weights root "
            "(start it with --weights-root <the run's broadcasts directory>)",
        )  # fmt: skip
    resolved = Path(path).resolve()
    if not resolved.is_relative_to(root):
        raise RequestError(
            403, f"{path} is outside {root}, the only directory this server loads weights from "
            "(start it with --weights-root <a directory holding it>)",
        )  # fmt: skip
    if not resolved.is_dir():
        raise RequestError(404, f"{path} is not a directory of weights")
    return resolved


def vocab_size(model, tokenizer) -> int | None:
    """Rows of the model's input embedding: the token ids it can read (None: unknown)."""
    embeddings = getattr(model, "get_input_embeddings", None)
    rows = getattr(embeddings() if callable(embeddings) else None, "num_embeddings", None)
    if isinstance(rows, int):
        return rows
    size = getattr(getattr(model, "config", None), "vocab_size", None)
    if isinstance(size, int):
        return size
    return len(tokenizer) if tokenizer is not None else None
