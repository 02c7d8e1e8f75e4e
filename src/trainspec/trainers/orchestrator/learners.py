"""What each `algo` learns from a scored group, as one `Signal` per completion (algorithms.py):

    learner = build_learner(algo, "orchestrator.algo", source_name, context)  # sources.py
    groups = (learner.sampler or policy.sampler).sample(...)     # sft: the frozen model's
    signals = learner.signals(prompt, group, rewards, policy.sampler, temperature)

* grpo, max_rl, rae, echo: the group's rewards become advantages (`Rewarded`, in algorithms.py
  beside the functions that score them; `from_config` picks the function of an algo table);
* opd: the teacher endpoint scores each completion; per-token advantage teacher - sampler
  log-probability (`Taught`);
* opsd: the live policy is its own teacher, shown the demonstration: `template` filled with the
  prompt's `demo_key` value (a data column, or the built-in taskset's answer) becomes a system
  message before the prompt, and the policy scores the completion after that hint (`Hinted`);
* sft: the completions come from the frozen model of `sampling.source`, and every sampled token
  is learned with cross-entropy (`Imitated`).

Teachers score at the sampling temperature, as the trainer computes the policy's
log-probabilities, so the two sides of every log-ratio see the same distribution.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import SetupError
from .algorithms import (
    DISTILLATION,
    AdvantageFn,
    LinearLengthPenalty,
    Rewarded,
    Signal,
    distill_advantages,
    group_advantages_for,
)
from .environments.task import Prompt
from .sampling.sampler import Completion, Sampler

log = logging.getLogger("trainspec.orchestrator")


class Learner(Protocol):
    sampler: Sampler | None  # where the rollouts come from when it is not the policy

    def signals(
        self,
        prompt: Prompt,
        group: list[Completion],
        rewards: list[float],
        policy: Sampler,
        temperature: float,
    ) -> list[Signal]: ...

    def close(self) -> None: ...


@dataclass
class Taught:
    """opd: a frozen teacher scores the policy's completions."""

    teacher: Sampler
    sampler: Sampler | None = None

    def signals(self, prompt, group, rewards, policy, temperature) -> list[Signal]:
        scores = self.teacher.score(
            [c.prompt_of(prompt.ids) for c in group], [c.token_ids for c in group],
            temperature=temperature,
        )  # fmt: skip
        return [
            Signal(token_advantages=c.sampled(distill_advantages(score, c.logprobs)))
            for score, c in zip(scores, group, strict=True)
        ]

    def close(self) -> None:
        self.teacher.close()


def hint_messages(template: str, demonstration: Any, messages: list[dict]) -> list[dict]:
    """The prompt's messages after a system message holding the filled template."""
    hint = template.replace("{demonstration}", str(demonstration))
    return [{"role": "system", "content": hint}, *messages]


@dataclass
class Hinted:
    """opsd: the policy, shown the demonstration, scores its own completions."""

    render: Any
    template: str
    demo_key: str
    path: str
    sampler: Sampler | None = None

    def demonstration(self, prompt: Prompt) -> Any:
        if self.demo_key in prompt.row:
            return prompt.row[self.demo_key]
        if self.demo_key == "answer":
            return prompt.answer
        have = ", ".join(sorted({*prompt.row, "answer"}))
        raise SetupError(
            f"{self.path}.demo_key",
            f"= {self.demo_key!r} is not in the source's rows (they have: {have})",
            "name the column that holds each prompt's demonstration",
        )

    def signals(self, prompt, group, rewards, policy, temperature) -> list[Signal]:
        hinted = self.render(
            hint_messages(self.template, self.demonstration(prompt), prompt.messages)
        )
        scores = policy.score(
            [hinted] * len(group), [c.token_ids for c in group], temperature=temperature
        )
        return [
            Signal(token_advantages=distill_advantages(score, c.logprobs))
            for score, c in zip(scores, group, strict=True)
        ]

    def close(self) -> None:
        pass


@dataclass
class Imitated:
    """sft: the frozen model's completions, learned token by token."""

    sampler: Sampler | None

    def signals(self, prompt, group, rewards, policy, temperature) -> list[Signal]:
        return [Signal(ce_weights=c.sampled([1.0] * len(c.token_ids))) for c in group]

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()


def scores_on_server(learner: Learner | None, policy_on_server: bool) -> bool:
    """Whether `learner` scores tokens through a server (opd's teacher there; opsd with the
    policy there), whose prompt_logprobs are of the unscaled distribution."""
    if isinstance(learner, Taught):
        return getattr(learner.teacher, "base_url", None) is not None
    return isinstance(learner, Hinted) and policy_on_server


def echo_alphas(roles) -> dict[str, float]:
    """role -> alpha of an echo `roles` table (roles set to null are left out)."""
    out = {}
    for role in ("system", "user", "assistant", "tool"):
        table = getattr(roles, role)
        if table is not None:
            out[role] = float(table.alpha)
    return out


# Why this build refuses the reference's hierarchical_grpo (it needs what this build lacks).
NOT_BUILT = {
    "hierarchical_grpo": "hierarchical_grpo compares the roles of a multi-agent environment "
    "level by level, and this build's advantages are per group and role only",
}


def from_config(algo, path: str) -> AdvantageFn:
    """The advantage function of a reward-based algo table (grpo, max_rl, rae, echo); a variant
    this build lacks is a SetupError."""
    if algo.type in NOT_BUILT:
        raise SetupError(
            f"{path}.type",
            f"= {algo.type!r} is not available: {NOT_BUILT[algo.type]}",
            'use type = "grpo", "max_rl", "rae", "echo", "opd", "opsd" or "sft"',
        )
    if algo.type in DISTILLATION:
        raise ValueError(f"{algo.type} learns from a teacher, not from advantages (learners.py)")
    if algo.type in ("grpo", "echo"):
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


def build_learner(algo, path: str, source_name: str, context) -> Learner:
    """The learner of one algo table. `context` has tokenizer, stop_id, render, max_batch and
    renderer_for(renderer_cfg) (a prompt renderer)."""
    from .sampling.frozen import frozen_sampler

    # which algo may sample a frozen model is the config rule sampling_source_fits_algo's
    if algo.type == "sft":
        sampler = frozen_sampler(
            algo.sampling.source, f"{path}.sampling.source", context.tokenizer,
            context.stop_id, max_batch=context.max_batch,
        )  # fmt: skip
        return Imitated(sampler)
    if algo.type == "opd":
        teacher = frozen_sampler(
            algo.teacher, f"{path}.teacher", context.tokenizer, context.stop_id,
            max_batch=context.max_batch,
        )  # fmt: skip
        return Taught(teacher)
    if algo.type == "opsd":
        render = context.renderer_for(algo.renderer)
        return Hinted(render, algo.template, algo.demo_key, path)
    if algo.type != "echo":
        return Rewarded(from_config(algo, path), source_name)
    if algo.filter is not None:
        raise SetupError(
            f"{path}.filter",
            f"= {algo.filter.import_path!r} narrows which environment tokens echo learns, and "
            "this build learns every one of the roles it weighs",
            "drop it (set a role's alpha to 0 to leave its messages out)",
        )
    alphas = echo_alphas(algo.roles)
    log.info(
        "%s: echo learns the environment's messages after the first reply (roles %s); a "
        "one-turn episode has none, and trains as grpo",
        source_name,
        ", ".join(f"{role} {alpha:g}" for role, alpha in alphas.items()),
    )
    return Rewarded(from_config(algo, path), source_name, alphas)
