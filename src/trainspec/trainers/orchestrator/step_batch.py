"""One step's samples, gathered group by group from the picked prompts (loop.py):

    batch = StepBatch()
    batch.play(picks, sources, policy, config, step)   # rollouts, rewards, what each teaches
    batch.samples, batch.rewards, batch.tokens         # what ships, and what is logged

`play` can run several times in a step: with `token_batch_size` the loop plays rounds of prompts
until the step holds that many tokens (`prompts_for` sizes the next round from the tokens a
prompt's group has taken so far).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..wire.batch import Sample
from .environments.task import Prompt
from .sampling.sampler import Completion

SEED_STRIDE = 1_000_003


def max_tokens_for(sampling, prompts, seq_len: int) -> int:
    """The completion cap: the source's, else what is left of seq_len after the longest prompt."""
    if sampling.max_tokens is not None:
        return sampling.max_tokens
    return max(1, seq_len - max(len(p.ids) for p in prompts))


@dataclass
class StepBatch:
    samples: list[Sample] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # every completion's, shipped or not
    lengths: list[int] = field(default_factory=list)  # completion tokens of each
    truncated: int = 0
    distilled: list[float] = field(default_factory=list)  # opd/opsd: teacher - policy, sampled
    tokens: int = 0  # prompt + completion tokens of every completion played
    prompts: int = 0
    rounds: int = 0
    first: tuple[Prompt, Completion] | None = None  # for log_data

    def prompts_for(self, config) -> int:
        """How many prompts the next round of a token-sized step takes: what the tokens left
        need at the tokens a prompt has taken so far (before the first round: as if every
        completion filled seq_len), at most concurrency.max_inflight's worth of groups."""
        per_prompt = (
            max(1, self.tokens // self.prompts)
            if self.prompts
            else config.group_size * config.seq_len
        )
        need = -(-(config.token_batch_size - self.tokens) // per_prompt)
        cap = max(1, (config.concurrency.max_inflight or 1024) // config.group_size)
        return max(1, min(need, cap))

    def play(self, picks, sources, policy, config, step: int) -> None:
        """Sample, score and learn from the groups of `picks` ((source index, position) each)."""
        for index, source in enumerate(sources):
            prompts = [source.task.at(position) for i, position in picks if i == index]
            if not prompts:
                continue
            sampler = source.learner.sampler or policy.sampler  # sft: the frozen model
            temperature = source.sampling.temperature
            played = source.task.rollouts(
                prompts,
                source.group_size,
                sampler,
                temperature=temperature,
                max_tokens=max_tokens_for(source.sampling, prompts, config.seq_len),
                seed=config.seed * SEED_STRIDE + step + index * SEED_STRIDE**2
                + self.rounds * SEED_STRIDE**3,
            )  # fmt: skip
            for prompt, (group, rewards) in zip(prompts, played, strict=True):
                self._learn(prompt, group, rewards, source, policy, config)
            self.prompts += len(prompts)
        self.rounds += 1

    def _learn(self, prompt, group, rewards, source, policy, config) -> None:
        signals = source.learner.signals(
            prompt, group, rewards, policy.sampler, source.sampling.temperature
        )
        for c, reward, taught in zip(group, rewards, signals, strict=True):
            if self.first is None:
                self.first = (prompt, c)
            if taught.token_advantages is not None:
                self.distilled += c.at_sampled(taught.token_advantages)
            self.tokens += len(c.prompt_of(prompt.ids)) + len(c.token_ids)
            # a sample no better or worse than its group teaches nothing
            if taught.teaches or not config.train.filter_zero_advantages:
                self.samples.append(
                    Sample(
                        c.prompt_of(prompt.ids),
                        c.token_ids,
                        c.logprobs,
                        taught.advantage,
                        reward,
                        taught.token_advantages,
                        taught.ce_weights,
                        c.mask,
                    )
                )
        self.rewards += rewards
        self.lengths += [len(c.token_ids) for c in group]
        self.truncated += sum(not c.finished for c in group)
