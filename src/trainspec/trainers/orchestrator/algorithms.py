"""The RL algorithms (the reference's `algo.type`): how a scored group becomes what the trainer
learns. Pure Python, no torch.

    group_advantages_for("grpo")(Group([1.0, 0.0, 0.5, 0.5])) == [0.5, -0.5, 0.0, 0.0]

Reward-based algorithms turn the rewards of one group (the completions sampled for one prompt)
into one advantage per sample, learned by the policy loss:

* grpo: reward minus the group mean, optionally after a linear length penalty;
* max_rl: (reward - mean) / mean, all zeros when the mean is <= 0;
* rae: reward minus an EMA baseline kept per (env, agent), updated after each reward is scored;
* echo: grpo on the sampled tokens, plus cross-entropy with each role's alpha on the tokens the
  environment wrote after the model's first reply (`echo_ce_weights`).

`Rewarded`, at the end, is their `Learner` (learners.py): it scores each group with one of these
functions and says what every completion teaches (a `Signal`).

Distillation learns from another model's view of each token instead (learners.py does the
scoring):

* opd and opsd: a per-token advantage `teacher log p - sampler log p` (`distill_advantages`),
  the policy gradient of the reverse KL from the policy to the teacher on the sampled tokens;
* sft: cross-entropy on every token a frozen model sampled (`Signal.ce_weights` all 1).

learners.py builds the advantage function of a reward-based `algo` table (`from_config`);
hierarchical_grpo, which needs a multi-agent environment, is refused there with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sampling.sampler import Sampler

ALGORITHMS = ("grpo", "max_rl", "rae")
DISTILLATION = ("opd", "opsd", "sft")


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


@dataclass(frozen=True)
class Signal:
    """What one completion trains on: one advantage for all its tokens, or one per token
    (`token_advantages`), and an optional cross-entropy weight per token (`ce_weights`)."""

    advantage: float = 0.0
    token_advantages: list[float] | None = None
    ce_weights: list[float] | None = None

    @property
    def teaches(self) -> bool:
        """False for a reward-based sample no better or worse than its group."""
        return self.advantage != 0.0 or bool(self.token_advantages) or bool(self.ce_weights)


def distill_advantages(teacher: Sequence[float], sampler: Sequence[float]) -> list[float]:
    """Per sampled token, teacher log p - sampler log p: the token's share of
    -KL(policy || teacher), so the policy gradient with these advantages lowers the reverse KL."""
    if len(teacher) != len(sampler):
        raise ValueError(f"{len(teacher)} teacher log-probabilities for {len(sampler)} tokens")
    return [t - s for t, s in zip(teacher, sampler, strict=True)]


def echo_ce_weights(
    segments: Sequence[tuple[str, int, bool]], alphas: dict[str, float]
) -> list[float] | None:
    """Cross-entropy weights over an episode's completion tokens, given as (role, tokens,
    generated) segments in order: tokens the environment wrote (not generated) after the model's
    first reply get their role's alpha, the rest 0. None when no token gets a weight (a
    single-turn episode: nothing but the model's own reply)."""
    weights: list[float] = []
    replied = False
    for role, count, generated in segments:
        alpha = 0.0 if generated or not replied else alphas.get(role, 0.0)
        weights += [alpha] * count
        replied = replied or generated
    return weights if any(weights) else None


@dataclass
class Rewarded:
    """grpo, max_rl, rae and echo: advantages from the group's rewards."""

    advantages: AdvantageFn
    source_name: str
    echo: dict[str, float] | None = None  # echo's role -> alpha
    sampler: Sampler | None = None

    def signals(self, prompt, group, rewards, policy, temperature) -> list[Signal]:
        advantages = self.advantages(
            Group(
                rewards,
                output_tokens=[sum(c.mask or [True] * len(c.token_ids)) for c in group],
                input_tokens=[len(c.prompt_of(prompt.ids)) for c in group],
                turns=[c.turns for c in group],
                keys=[(self.source_name, c.agent) for c in group],
            )
        )
        if self.echo is None:
            return [Signal(advantage) for advantage in advantages]
        # a one-turn reply has no environment tokens to weigh: echo_ce_weights gives None
        return [
            Signal(advantage, ce_weights=echo_ce_weights(
                c.segments or [("assistant", len(c.token_ids), True)], self.echo))
            for c, advantage in zip(group, advantages, strict=True)
        ]  # fmt: skip

    def close(self) -> None:
        pass
