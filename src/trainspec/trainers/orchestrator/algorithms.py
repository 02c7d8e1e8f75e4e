"""The RL advantage algorithms (the reference's `algo.type`): grpo, max_rl and rae.

    group_advantages_for("grpo")(Group([1.0, 0.0, 0.5, 0.5])) == [0.5, -0.5, 0.0, 0.0]

Each algorithm turns the rewards of one group (the completions sampled for one prompt) into
advantages, one per sample, as plain floats:

* grpo: reward minus the group mean, optionally after a linear length penalty;
* max_rl: (reward - mean) / mean, all zeros when the mean is <= 0;
* rae: reward minus an EMA baseline kept per (env, agent), updated after each reward is scored.

Pure Python, no torch. `from_config` builds the function of an `[orchestrator.algo]` table (or
a source's own `algo`); the reference's other variants (echo, hierarchical_grpo, opd, opsd, sft)
and a frozen model as the sampling source are refused there with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import SetupError

ALGORITHMS = ("grpo", "max_rl", "rae")


def _mean(values: Sequence[float]) -> float:
    if not values:
        raise ValueError("a group needs at least one reward")
    return sum(values) / len(values)


@dataclass(frozen=True)
class LinearLengthPenalty:
    """GRPO's linear length penalty: each weight scales one count, divided by its group max."""

    num_output_tokens_weight: float = 0.25
    num_input_tokens_weight: float = 0.1
    num_turns_weight: float = 0.1

    def __post_init__(self) -> None:
        for name in ("num_output_tokens_weight", "num_input_tokens_weight", "num_turns_weight"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _length_fractions(name: str, counts: Sequence[float] | None, size: int) -> list[float]:
    """Each count over the group's largest, the denominator clamped to >= 1 (all-zero is fine)."""
    if counts is None:
        raise ValueError(f"the length penalty weighs {name}: pass {name}= for every sample")
    if len(counts) != size:
        raise ValueError(f"{name} has {len(counts)} entries for {size} rewards")
    top = max(1.0, max(counts))
    return [count / top for count in counts]


def grpo_advantages(
    rewards: Sequence[float],
    length_penalty: LinearLengthPenalty | None = None,
    *,
    output_tokens: Sequence[float] | None = None,
    input_tokens: Sequence[float] | None = None,
    turns: Sequence[float] | None = None,
) -> list[float]:
    """Reward minus the group mean. With a penalty, each reward first loses
    `group mean reward x sum(weight * count / group max count)`, then the results are centred.

    A count list is needed only for a term whose weight is not 0. As in the reference, the penalty
    scales with the group's mean reward, so a group with a negative mean is rewarded for length.
    """
    mean = _mean(rewards)
    if length_penalty is None:
        return [reward - mean for reward in rewards]
    penalised = list(rewards)
    terms = (
        ("output_tokens", output_tokens, length_penalty.num_output_tokens_weight),
        ("input_tokens", input_tokens, length_penalty.num_input_tokens_weight),
        ("turns", turns, length_penalty.num_turns_weight),
    )
    for name, counts, weight in terms:
        if weight == 0:
            continue
        for i, fraction in enumerate(_length_fractions(name, counts, len(rewards))):
            penalised[i] -= mean * weight * fraction
    centre = _mean(penalised)
    return [reward - centre for reward in penalised]


def max_rl_advantages(rewards: Sequence[float]) -> list[float]:
    """(reward - mean) / mean; a group whose mean reward is <= 0 gets all zeros."""
    mean = _mean(rewards)
    if mean <= 0:
        return [0.0 for _ in rewards]
    return [(reward - mean) / mean for reward in rewards]


class RAEBaselines:
    """Per-(env, agent) EMA baselines: advantage = reward - baseline, then
    `baseline <- decay * baseline + (1 - decay) * reward`. Baselines start at 0 and live in memory
    only (the reference does not checkpoint them either)."""

    def __init__(self, decay: float = 0.95) -> None:
        if not 0 <= decay < 1:
            raise ValueError(f"decay must be in [0, 1), got {decay!r}")
        self.decay = decay
        self._baselines: dict[tuple[str, str], float] = {}

    def baseline(self, env: str, agent: str) -> float:
        return self._baselines.get((env, agent), 0.0)

    def score(self, env: str, agent: str, reward: float) -> float:
        """The advantage of one reward; the baseline moves only after it is scored."""
        baseline = self.baseline(env, agent)
        self._baselines[env, agent] = self.decay * baseline + (1 - self.decay) * reward
        return reward - baseline

    def advantages(self, rewards: Sequence[float], keys: Sequence[tuple[str, str]]) -> list[float]:
        """Score rewards in order, each with its (env, agent) key: a key seen twice in one call
        scores its second reward against the baseline the first one moved."""
        if len(keys) != len(rewards):
            raise ValueError(f"keys has {len(keys)} entries for {len(rewards)} rewards")
        return [self.score(env, agent, r) for r, (env, agent) in zip(rewards, keys, strict=True)]


@dataclass(frozen=True)
class Group:
    """One group's rewards and what the algorithms may need besides them, one entry per sample."""

    rewards: Sequence[float]
    output_tokens: Sequence[float] | None = None
    input_tokens: Sequence[float] | None = None
    turns: Sequence[float] | None = None
    keys: Sequence[tuple[str, str]] | None = None  # (env, agent), for rae


AdvantageFn = Callable[[Group], list[float]]


def group_advantages_for(
    algo_type: str,
    *,
    length_penalty: LinearLengthPenalty | None = None,
    decay: float | None = None,
) -> AdvantageFn:
    """The function that scores groups for `algo_type`. For rae it holds the baselines, so build
    it once per run and call it for every group."""
    if algo_type not in ALGORITHMS:
        raise ValueError(f"unknown algo type {algo_type!r}; known: {', '.join(ALGORITHMS)}")
    if length_penalty is not None and algo_type != "grpo":
        raise ValueError(f"length_penalty applies to grpo only, not {algo_type}: drop it")
    if decay is not None and algo_type != "rae":
        raise ValueError(f"decay applies to rae only, not {algo_type}: drop it")
    if algo_type == "grpo":
        return lambda g: grpo_advantages(
            g.rewards,
            length_penalty,
            output_tokens=g.output_tokens,
            input_tokens=g.input_tokens,
            turns=g.turns,
        )
    if algo_type == "max_rl":
        return lambda g: max_rl_advantages(g.rewards)
    baselines = RAEBaselines(0.95 if decay is None else decay)

    def rae(group: Group) -> list[float]:
        if group.keys is None:
            raise ValueError("rae keeps a baseline per (env, agent): pass keys= for every sample")
        return baselines.advantages(group.rewards, group.keys)

    return rae


# Why this build refuses the reference's other variants (they need what it does not have).
NOT_BUILT = {
    "echo": "echo weighs the environment's tokens of a multi-turn episode, and this build runs "
    "single-turn built-in tasksets only",
    "hierarchical_grpo": "hierarchical_grpo compares the roles of a multi-agent environment, and "
    "this build runs single-agent built-in tasksets only",
    "opd": "opd scores completions on a teacher served by an inference server, which this build "
    "does not reach yet",
    "opsd": "opsd distils from the policy shown a demonstration, which this build does not do yet",
    "sft": "sft trains on a frozen model's completions from an inference server, which this "
    "build does not reach yet",
}


def from_config(algo, path: str) -> AdvantageFn:
    """The advantage function of an algo table; a variant this build lacks is a SetupError."""
    if algo.type in NOT_BUILT:
        raise SetupError(
            f"{path}.type",
            f"= {algo.type!r} is not available: {NOT_BUILT[algo.type]}",
            'use type = "grpo", "max_rl" or "rae"',
        )
    if algo.sampling.source != "policy":
        raise SetupError(
            f"{path}.sampling.source",
            f"is a frozen model; {algo.type} learns from the policy's own completions",
            'drop it (the source is "policy")',
        )
    if algo.type == "grpo":
        penalty = algo.length_penalty
        assert penalty is None or penalty.type == "linear"  # the one penalty the schema has
        return group_advantages_for(
            "grpo",
            length_penalty=None
            if penalty is None
            else LinearLengthPenalty(
                penalty.num_output_tokens_weight,
                penalty.num_input_tokens_weight,
                penalty.num_turns_weight,
            ),
        )
    if algo.type == "rae":
        return group_advantages_for("rae", decay=algo.decay)
    return group_advantages_for(algo.type)
