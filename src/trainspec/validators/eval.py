"""Rules of the `evaluate` command's config (schema eval.json): its eval sources as the
orchestrator's and an SFT run's are checked, and the server it samples through.

* [inference]'s vLLM serves `model`: inference.vllm.model defaults to it, and may not name
  another model.
* One server: eval starts [inference]'s and points eval.client.base_url at it, so a written
  base_url beside [inference] is one server too many.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .context import RuleContext, show
from .orchestrator import (
    check_concurrency_bounds,
    check_env_keys,
    check_source_names,
    check_source_tasks,
)

if TYPE_CHECKING:
    from trainspec.generated.eval import EvalsConfig


def resolve_inference_model(cfg: EvalsConfig, ctx: RuleContext) -> None:
    """inference.vllm.model, unless written, becomes `model`: the server loads the model
    evaluated."""
    if cfg.inference is not None and "model" not in cfg.inference.vllm.model_fields_set:
        ctx.resolve(cfg.inference.vllm, "model", cfg.model)


def inference_serves_the_model(cfg: EvalsConfig, ctx: RuleContext) -> None:
    """inference.vllm.model, when written, is `model`: eval evaluates the model it serves."""
    if cfg.inference is not None and cfg.inference.vllm.model != cfg.model:
        ctx.error(
            "inference.vllm.model",
            f"= {show(cfg.inference.vllm.model)}, but the model evaluated is model = "
            f"{show(cfg.model)}",
            "drop inference.vllm.model (the server loads `model`)",
            related=("model",),
        )


def one_server(cfg: EvalsConfig, ctx: RuleContext) -> None:
    """eval.client.base_url (a server you started) and [inference] (a server eval starts) are
    two servers: name one."""
    if cfg.inference is not None and "base_url" in cfg.eval.client.model_fields_set:
        ctx.error(
            "eval.client.base_url",
            "is set beside [inference]: eval starts [inference]'s server and sends the evals to it",
            "drop eval.client.base_url (eval fills it in), or drop [inference] to use the server "
            "at base_url",
            related=("inference",),
        )


def validate_eval_sources(cfg: EvalsConfig, ctx: RuleContext) -> None:
    """The eval sources have distinct names (not "agg"), each one task, and no near miss of
    verifiers' own keys in their open env tables."""
    sources = list(cfg.eval.source)
    check_source_names(ctx, "eval.source", sources)
    check_source_tasks(ctx, "eval.source", sources)
    check_env_keys(ctx, "eval.source", sources)


def validate_eval_concurrency(cfg: EvalsConfig, ctx: RuleContext) -> None:
    """eval.concurrency.initial_inflight and min_inflight may not exceed its max_inflight."""
    check_concurrency_bounds(ctx, "eval.concurrency", cfg.eval.concurrency)


EVAL_RULES = (
    resolve_inference_model,
    inference_serves_the_model,
    one_server,
    validate_eval_sources,
    validate_eval_concurrency,
)
