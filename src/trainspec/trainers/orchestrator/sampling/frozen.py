"""A frozen model behind an endpoint you started (the reference's FrozenModelConfig): opd's
`teacher`, and the `sampling.source` that sft distillation samples from.

    teacher = frozen_sampler(algo.teacher, "orchestrator.algo.teacher", tokenizer, stop_id)
    teacher.score(prompts, completions, temperature=1.0)      # its log-probabilities

It is an OpenAISampler of `base_url` that never loads weights. Before the run it waits up to
`wait_for_ready_timeout` seconds for `GET /models` to answer and, unless `skip_model_check`,
checks that the endpoint serves `name`. The API key comes from the `api_key_var` variable;
`headers` and `headers_from_env` go with every request. The teacher shares the policy's token
ids (the same tokenizer): it scores the policy's tokens as they are.

On a machine without vLLM, a local model is served this way by model_server.py:

    python -m trainspec.trainers.orchestrator.sampling.model_server <weights dir> --port 8001
"""

from __future__ import annotations

import os
import time

from ...errors import SetupError, SetupErrors, raise_all
from .openai_client import OpenAISampler

POLL_S = 0.5


def _refusals(cfg, path: str) -> list[SetupError]:
    """Client settings that mean nothing for a frozen model in this build."""
    errors = []
    if cfg.extra_headers_from_state:
        errors.append(
            SetupError(
                f"{path}.extra_headers_from_state",
                f"= {dict(cfg.extra_headers_from_state)!r}: headers from a rollout's state need "
                "a multi-turn environment's state, and this build's rollouts have none",
                "drop it (headers and headers_from_env go with every request)",
            )
        )
    if cfg.admin_base_url:
        errors.append(
            SetupError(
                f"{path}.admin_base_url",
                "is set: admin URLs take weight updates, and a frozen model never gets any",
                "drop it",
            )
        )
    return errors


def _headers(cfg, path: str) -> dict[str, str]:
    headers = dict(cfg.headers)
    missing = []
    for header, variable in dict(cfg.headers_from_env).items():
        value = os.environ.get(variable)
        if value is None:
            missing.append(SetupError(
                f"{path}.headers_from_env.{header}",
                f"names the environment variable {variable!r}, which is not set",
                f"export {variable}=..., or drop the header",
            ))  # fmt: skip
        else:
            headers[header] = value
    raise_all(missing)
    return headers


def wait_until_ready(sampler: OpenAISampler, cfg, path: str) -> None:
    """Wait for the endpoint's model list; check it serves `name` unless skip_model_check."""
    import httpx

    url = f"{sampler.base_url}/models"
    deadline = time.monotonic() + cfg.wait_for_ready_timeout
    reason = "no answer yet"
    while True:
        try:
            response = sampler._client.get(url)
            if response.status_code == 200:
                break
            reason = f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
        if time.monotonic() >= deadline:
            raise SetupError(
                f"{path}.base_url",
                f"{url} was not ready within wait_for_ready_timeout = "
                f"{cfg.wait_for_ready_timeout} s ({reason})",
                "start the model's server first (vLLM, or `python -m "
                "trainspec.trainers.orchestrator.sampling.model_server <weights dir> --name "
                "<name> --port <port>`), or check the URL",
            )
        time.sleep(POLL_S)
    if cfg.skip_model_check:
        return
    try:
        served = [str(model["id"]) for model in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        served = None
    if served is None or cfg.name not in served:
        raise SetupError(
            f"{path}.name",
            f"= {cfg.name!r} is not a model {url} serves"
            + (f" (it serves {', '.join(map(repr, served))})" if served else ""),
            "use the served model's name, or set skip_model_check = true",
        )


def frozen_sampler(cfg, path: str, tokenizer, stop_id: int, *, max_batch=None) -> OpenAISampler:
    """The frozen model's client, once its endpoint is ready; refusals all at once."""
    errors = _refusals(cfg, path)
    headers = None
    try:
        headers = _headers(cfg, path)
    except SetupError as err:
        errors.append(err)
    except SetupErrors as err:
        errors.extend(err.errors)
    raise_all(errors)
    sampler = OpenAISampler(
        cfg.base_url,
        cfg.name,
        tokenizer,
        stop_id,
        api_key=os.environ.get(cfg.api_key_var) or None,
        headers=headers,
        max_batch=max_batch,
        field=f"{path}.base_url",
    )
    wait_until_ready(sampler, cfg, path)
    return sampler
