"""Evaluating a policy on eval sources, the same for the orchestrator's [orchestrator.eval] and an
SFT run's [eval] (trainers/sft/online_evals.py):

    metrics = run_evals(sampler, sources, step, seq_len, weights_step=step)   # the due ones
    metrics = run_evals(sampler, sources, step, seq_len, weights_step=step, every=True)
    errors = eval_sampling_refusals(config.eval, "orchestrator.eval")

Each source's first num_examples prompts are answered greedily (no eval temperature) or with
group_size samples each, and scored by the source's reward; a source with a reference answer
(the built-in tasksets) also counts exact matches. The metrics are `eval/<name>/reward`,
`eval/<name>/exact_match`, and their means over the evaluated sources, `eval_reward` and
`eval_exact_match`; each evaluation is a log line.
"""

from __future__ import annotations

import logging

from ..errors import SetupError
from .sources import EvalSource
from .step_batch import max_tokens_for

LOG = logging.getLogger("trainspec.orchestrator")
EVAL_PLAIN = (
    "evaluation samples the plain distribution at the eval temperature (greedy without one), "
    "and sends no other sampling settings or request extras"
)


def evaluate(sampler, source: EvalSource, seq_len: int, *, seed: int) -> dict[str, float]:
    """Exact match and mean reward of the source's first num_examples prompts: greedy answers
    without an eval temperature, else group_size samples per prompt."""
    prompts = source.task.first(source.num_examples)
    temperature = source.sampling.temperature
    played = source.task.rollouts(
        prompts,
        1 if temperature is None else source.group_size,
        sampler,
        temperature=temperature or 0.0,
        max_tokens=max_tokens_for(source.sampling, prompts, seq_len),
        seed=seed,
    )
    pairs = [(p, c) for p, (group, _) in zip(prompts, played, strict=True) for c in group]
    rewards = [r for _, scores in played for r in scores]
    count = max(1, len(pairs))
    result = {"reward": sum(rewards) / count}
    exact = [source.task.exact(c.text, p) for p, c in pairs]
    if exact and None not in exact:  # your data and environments have rewards, no answer
        hits = [c.finished and bool(e) for (_, c), e in zip(pairs, exact, strict=True)]
        result["exact_match"] = sum(hits) / count
    return result


def due(source: EvalSource, step: int) -> bool:
    """Whether `source` is evaluated at `step` (every `interval` steps)."""
    return step % source.interval == 0


def run_evals(
    sampler,
    sources: list[EvalSource],
    step: int,
    seq_len: int,
    *,
    weights_step: int,
    every: bool = False,
    final: bool = False,
    log: logging.Logger = LOG,
) -> dict[str, float]:
    """Evaluate the sources due at `step` (every one with `every`) with the weights of
    `weights_step`; metrics eval/<name>/..., eval_reward and eval_exact_match (their means;
    exact match of the sources that have a reference answer), each said on `log`."""
    metrics: dict[str, float] = {}
    scores, rewards = [], []
    for source in sources:
        if not every and not due(source, step):
            continue
        result = evaluate(sampler, source, seq_len, seed=weights_step)
        rewards.append(result["reward"])
        if "exact_match" in result:
            scores.append(result["exact_match"])
        metrics.update({f"eval/{source.name}/{key}": value for key, value in result.items()})
        which = "the final weights" if final else f"the weights of step {weights_step}"
        exact = (
            f"exact match {100 * result['exact_match']:.1f}%, " if "exact_match" in result else ""
        )
        log.info(
            "step %d: %s held-out %sreward %.3f (%d prompts, %s)",
            step,
            source.name,
            exact,
            result["reward"],
            source.task.count(source.num_examples),
            which,
        )
    if scores:
        metrics["eval_exact_match"] = sum(scores) / len(scores)
    if rewards:
        metrics["eval_reward"] = sum(rewards) / len(rewards)
    return metrics


def eval_sampling_refusals(eval_cfg, at: str) -> list[SetupError]:
    """What an eval table (at `at`: "orchestrator.eval", "eval") asks that evaluation does not
    send: sampling settings beyond the temperature and the token cap, request extras, and a
    source's pick ratio."""
    errors: list[SetupError] = []
    tables = [(f"{at}.sampling", eval_cfg.sampling)] + [
        (f"{at}.source[{i}].sampling", source.sampling)
        for i, source in enumerate(eval_cfg.source)
        if source.sampling is not None
    ]
    for where, sampling in tables:
        for key in ("top_p", "top_k", "min_p", "reasoning_effort"):
            if getattr(sampling, key) is not None:
                errors.append(SetupError(f"{where}.{key}", f"is set: {EVAL_PLAIN}", "drop it"))
        if sampling.extra_body:
            errors.append(SetupError(f"{where}.extra_body", f"is set: {EVAL_PLAIN}", "drop it"))
    for i, source in enumerate(eval_cfg.source):
        if source.ratio != 1.0:
            errors.append(
                SetupError(
                    f"{at}.source[{i}].ratio",
                    f"= {source.ratio}: ratio weighs how often a train source is picked; an eval "
                    "source evaluates its first num_examples at its interval",
                    "drop it",
                )
            )
    return errors
