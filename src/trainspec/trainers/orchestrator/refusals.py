"""What the orchestrator refuses at start: settings of the reference's orchestrator that this
build cannot honour yet, each named by its dotted path with the reason, all at once.

    check_support(config)       # SetupErrors, or nothing

A setting is refused only when a config sets it to something other than its default (the
default asks for nothing this build lacks). What the built-in tasksets refuse of a source's
`env` table is refused where the sources are built (sources.py).
"""

from __future__ import annotations

from trainspec.generated.client import ClientConfig
from trainspec.validators.orchestrator import algo_tables

from ..errors import SetupError, raise_all
from ..refusals import renderer_refusals, set_by_user
from .evals import eval_sampling_refusals
from .sampling.inflight import adaptive_settings

PREFIX = "orchestrator."
NO_SERVER = "this build's samplers generate in process or on an OpenAI-compatible server"
LOCAL_ONLY = (
    "the in-process sampler samples from the full distribution at the temperature; "
    "request extras go to a server"
)


def _starts_servers(config) -> bool:
    """Whether the orchestrator starts an environment server: an environment source with a
    serve table that names no address."""
    from .environments.players import starts_server

    groups = [config.train.source] + ([config.eval.source] if config.eval is not None else [])
    return any(starts_server(source) for group in groups for source in group)


def check_support(config) -> None:
    errors: list[SetupError] = []

    def refuse(path: str, problem: str, fix: str = "drop it") -> None:
        errors.append(SetupError(PREFIX + path, problem, fix))

    if config.tasks_per_minute is not None:
        refuse("tasks_per_minute", "is set: this build does not rate-limit episodes")
    if config.env_server_base_port != 5000 and not _starts_servers(config):
        refuse(
            "env_server_base_port",
            "is set, and no source asks for an environment server (an environment source "
            "plays in the orchestrator unless it has a serve table that names no "
            "serve.address)",
            "drop it, or give the source a serve table",
        )
    if config.inference_metrics_roles is not None:
        refuse(
            "inference_metrics_roles",
            "is set: this build does not run disaggregated (prefill/decode) inference",
        )
    if not config.collect_inference_metrics:
        refuse(
            "collect_inference_metrics",
            "= false: this build never copies a server's /metrics, so there is nothing to turn off",
        )
    if config.monitors.prime is not None:
        refuse(
            "monitors.prime",
            "is set: this build does not upload to the Prime Intellect platform",
            "drop it; [monitors.wandb] and the metrics file work",
        )
    if config.model.vlm is not None:
        refuse("model.vlm", "is set: this build trains and samples text-only models")
    if config.model.lora is not None:
        refuse(
            "model.lora",
            "is set: the orchestrator samples with the full weights the trainer broadcasts "
            "(LoRA merged), not a served adapter",
        )
    changed = sorted(
        {path.split(".")[0] for path in set_by_user(config.model.client, ClientConfig())}
    )
    if changed:
        refuse(
            "model.client",
            f"sets {', '.join(changed)}: {NO_SERVER}, whose address is "
            "[orchestrator.sampler] base_url",
            'drop [orchestrator.model.client]; set sampler.type = "openai" and '
            "sampler.base_url instead",
        )
    if config.sampler.type == "local":
        for key in adaptive_settings(config.concurrency):
            refuse(
                f"concurrency.{key}",
                "is set: the number of episodes in flight follows a server's KV-cache usage, "
                "and the in-process sampler has none (it samples max_inflight at a time)",
                "set concurrency.max_inflight alone, or sample from vLLM "
                '(sampler.type = "openai", or [inference] on a GPU under rl)',
            )
    if config.ckpt is not None and config.ckpt.skip_progress:
        refuse(
            "ckpt.skip_progress",
            "= true: the orchestrator's step is the step the trainer resumed from, which it "
            "cannot start over",
        )
    if config.seq_len % config.pad_to_multiple_of:
        refuse(
            "pad_to_multiple_of",
            f"= {config.pad_to_multiple_of} does not divide seq_len = {config.seq_len}; every "
            "packed row is seq_len tokens long",
            f"set seq_len to a multiple of {config.pad_to_multiple_of}",
        )
    if config.sampler.type == "local" and config.train.sampling.extra_body:
        refuse("train.sampling.extra_body", f"is set: {LOCAL_ONLY}")
    if config.eval is not None:
        errors.extend(eval_sampling_refusals(config.eval, PREFIX + "eval"))
    errors.extend(renderer_refusals(config.renderer, PREFIX, "orchestrator"))
    for index, algo in algo_tables(config):  # opsd renders its hint with a renderer of its own
        if algo.type == "opsd":
            at = "algo." if index is None else f"train.source[{index}].algo."
            errors.extend(renderer_refusals(algo.renderer, PREFIX + at, "orchestrator"))
    raise_all(errors)
