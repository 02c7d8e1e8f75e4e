"""One step's batch: which train source each of its prompts comes from and which of that
source's prompts it is (the pickers), and the samples they give, gathered group by group
(StepBatch):

    picker = build_picker(config, sources, own_dir)     # SourcePicker or TokenPicker
    picker.resume(step)                                 # once, at the trainer's first step
    picker.start(step)
    batch = StepBatch()
    while (picks := picker.next_round(batch, config)) is not None:
        batch.play(picks, sources, policy, config, step)    # rollouts, rewards, what each teaches
    picker.commit(step)                                 # the step's picks, done
    batch.samples, batch.rewards, batch.tokens          # what ships, and what is logged

A step is sized by batch_size (SourcePicker: one round) or by token_batch_size (TokenPicker: the
loop plays rounds of prompts until the step holds that many tokens; `prompts_for` sizes the next
round from the tokens a prompt's group has taken so far). Both answer the same calls (Picker),
so the loop walks either the same way.

Sources are drawn in proportion to their ratios, one prompt (a group of the source's group_size
completions) at a time, from a generator seeded by the run's seed and the step; each source
walks its own seeded prompt stream. So the picks of a step are the same for the same seed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..errors import SetupError
from ..run.atomic_files import read_records, write_atomic
from ..wire.batch import Sample
from .environments.task import Prompt
from .sampling.sampler import Completion
from .sources import TrainSource

SEED_STRIDE = 1_000_003
Picks = list[tuple[int, int]]  # (source index, position in its prompt stream) per prompt


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


# -- which prompts a step plays: the pickers ------------------------------------------------


class Picker(Protocol):
    """What the loop asks of a picker, step by step (the module's example)."""

    def resume(self, step: int) -> None:
        """Continue at step `step`, the trainer's first (0: a fresh run)."""

    def start(self, step: int) -> None:
        """Begin step `step`'s picks."""

    def next_round(self, batch: StepBatch, config) -> Picks | None:
        """The picks of the step's next round of prompts, given what `batch` holds so far;
        None once the step is full."""

    def commit(self, step: int) -> None:
        """Step `step`'s picks are played."""


def build_picker(config, sources: list[TrainSource], own_dir: Path) -> Picker:
    """The orchestrator's: by token_batch_size when set (its record in `own_dir`), else by
    batch_size (128 unless set)."""
    if config.token_batch_size is None:
        return SourcePicker(sources, config.batch_size or 128, config.seed)
    return TokenPicker(sources, config.seed, own_dir / "picks.jsonl", config.token_batch_size)


def draw(rng: random.Random, sources: list[TrainSource]) -> int:
    """The index of one source, drawn in proportion to the sources' ratios."""
    if len(sources) == 1:
        return 0
    return rng.choices(range(len(sources)), [s.ratio for s in sources])[0]


class SourcePicker:
    """The picks of a step sized by batch_size: sources drawn until the step holds `batch_size`
    completions, in one round. They depend on the seed and the step only, so a resumed run
    replays the earlier steps' picks (no model calls) to find its place."""

    def __init__(self, sources: list[TrainSource], batch_size: int, seed: int) -> None:
        self.sources = sources
        self.batch_size = batch_size
        self.seed = seed
        self._next_step = 0
        self._used = [0] * len(sources)  # prompts taken from each source before _next_step
        self._pending: int | None = None  # the step started and not yet picked

    def _draw(self, step: int) -> list[int]:
        rng = random.Random(f"{self.seed}:sources:{step}")
        picks: list[int] = []
        total = 0
        while total < self.batch_size:
            index = draw(rng, self.sources)
            picks.append(index)
            total += self.sources[index].group_size
        return picks

    def step(self, step: int) -> Picks:
        """(source index, position in its prompt stream) of each of step `step`'s prompts."""
        if step < self._next_step:
            self._next_step, self._used = 0, [0] * len(self.sources)
        while self._next_step < step:
            for index in self._draw(self._next_step):
                self._used[index] += 1
            self._next_step += 1
        out = []
        for index in self._draw(step):
            out.append((index, self._used[index]))
            self._used[index] += 1
        self._next_step += 1
        return out

    def resume(self, step: int) -> None:
        """Nothing to read: `step` replays the steps before the first it is asked for."""

    def start(self, step: int) -> None:
        self._pending = step

    def next_round(self, batch: StepBatch, config) -> Picks | None:
        """The whole step's picks, then None."""
        step, self._pending = self._pending, None
        return None if step is None else self.step(step)

    def commit(self, step: int) -> None:
        """Nothing to write: the picks derive from the step."""


class TokenPicker:
    """The picks of a step sized by token_batch_size: sources drawn one prompt at a time (as
    SourcePicker does) for as many prompts as the step's tokens need, which depends on the
    completions. A resumed run cannot replay that without sampling, so every step's prompt
    counts are written down (`picks.jsonl` in the orchestrator's directory, a line a step) and
    a resume at step n starts from the counts after step n - 1."""

    def __init__(self, sources: list[TrainSource], seed: int, record: Path, tokens: int) -> None:
        self.sources = sources
        self.tokens = tokens  # token_batch_size
        self.seed = seed
        self.record = record
        self._used = [0] * len(sources)
        self._rng = random.Random()
        self._step = 0
        self._before: int | None = None  # the batch's tokens before the round last picked

    def resume(self, step: int) -> None:
        """Continue after step `step` - 1 (step 0: a fresh record)."""
        if step == 0:
            self.record.unlink(missing_ok=True)
            return
        records = read_records(self.record)  # a line torn by a crash: skipped, said
        counts = {entry["step"]: entry["used"] for entry in records}
        if step - 1 not in counts or len(counts[step - 1]) != len(self.sources):
            raise SetupError(
                "orchestrator.token_batch_size",
                f"the run resumes at step {step}, and {self.record} does not say which prompts "
                f"steps up to {step - 1} took (a step sized by tokens cannot be replayed)",
                "resume in the run directory that ran those steps, with the same train sources "
                "(or size steps by batch_size)",
            )
        self._used = list(counts[step - 1])
        kept = [json.dumps(entry) + "\n" for entry in records if entry["step"] < step]
        write_atomic(self.record, "".join(kept))

    def start(self, step: int) -> None:
        self._rng = random.Random(f"{self.seed}:sources:{step}")
        self._step, self._before = step, None

    def take(self, count: int) -> Picks:
        """(source index, position) of `count` more prompts of the current step."""
        out = []
        for _ in range(count):
            index = draw(self._rng, self.sources)
            out.append((index, self._used[index]))
            self._used[index] += 1
        return out

    def next_round(self, batch: StepBatch, config) -> Picks | None:
        """As many more prompts as the tokens left need (StepBatch.prompts_for), or None once
        the batch holds `tokens`; a round that added no tokens is refused."""
        if self._before is not None and batch.tokens == self._before:
            raise SetupError(
                "orchestrator.token_batch_size",
                f"step {self._step}: a round of prompts gave no completions to count",
                "see the failed episodes above",
            )
        if batch.tokens >= self.tokens:
            return None
        self._before = batch.tokens
        return self.take(batch.prompts_for(config))

    def commit(self, step: int) -> None:
        with self.record.open("a") as file:
            file.write(json.dumps({"step": step, "used": self._used}) + "\n")
